"""Text normalisation: per-language tables of written text -> what a native speaker says.

Each table covers the cases every language must handle (money, percent, a plain number, an ISO date, an HTTP
status code, @mention, #1, &, a decimal in the local convention, a phone number, ordinals, a web address, an
e-mail address, a time, a range) and then what is particular to the language."""

from __future__ import annotations

import threading
import time

import pytest

from qwen3_tts_server.text.normalize import LANGUAGES, normalize

ENGLISH = [
    ("$100", "one hundred dollars"),
    ("$5.50 and $0.99", "five dollars and fifty cents and ninety-nine cents"),
    ("$3.5 million", "three point five million dollars"),
    ("75%", "seventy-five percent"),
    ("42", "forty-two"),
    ("1,234", "one thousand two hundred and thirty-four"),
    ("I have 1,000 pears.", "I have one thousand pears."),
    ("3.14", "three point one four"),
    ("2024-01-15", "January fifteenth, twenty twenty-four"),
    ("January 15, 2024", "January fifteenth, twenty twenty-four"),
    ("HTTP 404", "HTTP four oh four"),
    ("HTTP 500", "HTTP five hundred"),
    ("@user", "at user"),
    ("#1", "number one"),
    ("Tom & Jerry", "Tom and Jerry"),
    ("1 + 1 = 2", "one plus one equals two"),
    ("+1 555 123 4567", "plus one, five five five, one two three, four five six seven"),
    ("(555) 123-4567", "five five five, one two three, four five six seven"),
    ("1st/2nd/3rd", "first or second or third"),
    ("the 21st century", "the twenty-first century"),
    ("https://example.com/a?b=1", "example dot com slash a question mark b equals one"),
    ("Write to user@example.com.", "Write to user at example dot com."),
    ("10:30", "ten thirty"),
    ("at 9:05 pm", "at nine oh five PM"),
    ("3-5 people", "three to five people"),
    ("25°C", "twenty-five degrees Celsius"),
    ("5 km and 10 kg", "five kilometers and ten kilograms"),
    ("100 km/h", "one hundred kilometers per hour"),
    ("Dr. Smith", "Doctor Smith"),
    ("in 1990", "in nineteen ninety"),
    ("the 1990s", "the nineteen nineties"),
    ("1/2 cup", "one half cup"),
    ("-5", "minus five"),
]

GERMAN = [
    ("100 €", "einhundert Euro"),
    ("5,50 €", "fünf Euro und fünfzig Cent"),
    ("75 %", "fünfundsiebzig Prozent"),
    ("42", "zweiundvierzig"),
    ("1.234,5", "eintausendzweihundertvierunddreißig Komma fünf"),
    ("3,14", "drei Komma eins vier"),
    ("2024-01-15", "fünfzehnter Januar zweitausendvierundzwanzig"),
    ("am 15.01.2024", "am fünfzehnten Januar zweitausendvierundzwanzig"),
    ("HTTP 404", "HTTP vier null vier"),
    ("@user", "at user"),
    ("#1", "Nummer eins"),
    ("A & B", "A und B"),
    ("+49 30 1234567", "plus neunundvierzig, drei null, eins zwei drei vier fünf sechs sieben"),
    ("der 3. Platz", "der dritte Platz"),
    ("https://example.com/a?b=1", "example Punkt com Slash a Fragezeichen b gleich eins"),
    ("user@example.com", "user at example Punkt com"),
    ("10:30", "zehn Uhr dreißig"),
    ("um 1:00", "um ein Uhr"),
    ("3-5 Personen", "drei bis fünf Personen"),
    ("1 kg", "ein Kilogramm"),
    ("1 Stunde und 1 Tag", "eine Stunde und ein Tag"),
    ("2 h", "zwei Stunden"),
    ("im Jahr 1999", "im Jahr neunzehnhundertneunundneunzig"),
    ("z.B. morgen", "zum Beispiel morgen"),
    ("25 °C", "fünfundzwanzig Grad Celsius"),
]

FRENCH = [
    ("100 €", "cent euros"),
    ("5,50 €", "cinq euros et cinquante centimes"),
    ("2 000 000 €", "deux millions d'euros"),
    ("75 %", "soixante-quinze pour cent"),
    ("42", "quarante-deux"),
    ("1 234,5", "mille deux cent trente-quatre virgule cinq"),
    ("3,14", "trois virgule quatorze"),
    ("2024-01-15", "quinze janvier deux mille vingt-quatre"),
    ("le 1er janvier", "le premier janvier"),
    ("HTTP 404", "HTTP quatre cent quatre"),
    ("@user", "arobase user"),
    ("#1", "numéro un"),
    ("A & B", "A et B"),
    ("01 23 45 67 89", "zéro un, vingt-trois, quarante-cinq, soixante-sept, quatre-vingt-neuf"),
    ("la 2e et la 1re", "la deuxième et la première"),
    ("https://example.com/a?b=1", "example point com slash a point d'interrogation b égal un"),
    ("user@example.com", "user arobase example point com"),
    ("10h30", "dix heures trente"),
    ("21:15", "vingt et une heures quinze"),
    ("3-5 personnes", "de trois à cinq personnes"),
    ("21 personnes", "vingt et une personnes"),
    ("1,5 km", "un virgule cinq kilomètre"),
    ("Mme Dupont", "Madame Dupont"),
]

SPANISH = [
    ("100 €", "cien euros"),
    ("$100", "cien dólares"),
    ("1.234,56 €", "mil doscientos treinta y cuatro euros con cincuenta y seis céntimos"),
    ("75 %", "setenta y cinco por ciento"),
    ("42", "cuarenta y dos"),
    ("3,14", "tres coma catorce"),
    ("2024-01-15", "quince de enero de dos mil veinticuatro"),
    ("HTTP 404", "HTTP cuatrocientos cuatro"),
    ("@user", "arroba user"),
    ("#1", "número uno"),
    ("A & B", "A y B"),
    ("+34 912 345 678", "más treinta y cuatro, nueve uno dos, tres cuatro cinco, seis siete ocho"),
    ("el 2.º piso y la 1.ª vez", "el segundo piso y la primera vez"),
    ("https://example.com/a?b=1", "example punto com barra a signo de interrogación b igual uno"),
    ("user@example.com", "user arroba example punto com"),
    ("10:30", "diez y treinta"),
    ("a la 1:00", "a la una en punto"),
    ("3-5 personas", "de tres a cinco personas"),
    ("21.000 personas", "veintiún mil personas"),
    ("200 personas", "doscientas personas"),
    ("1 día", "un día"),
    ("1 + 1 = 2", "uno más uno igual a dos"),
    ("Sr. García", "señor García"),
]

ITALIAN = [
    ("100 €", "cento euro"),
    ("1.234,56 €", "milleduecentotrentaquattro euro e cinquantasei centesimi"),
    ("75%", "settantacinque per cento"),
    ("42", "quarantadue"),
    ("3,14", "tre virgola quattordici"),
    ("2024-01-15", "quindici gennaio duemilaventiquattro"),
    ("1 gennaio", "primo gennaio"),
    ("HTTP 404", "HTTP quattrocentoquattro"),
    ("@user", "chiocciola user"),
    ("#1", "numero uno"),
    ("A & B", "A e B"),
    ("+39 06 1234 5678", "più trentanove, zero sei, uno due tre quattro, cinque sei sette otto"),
    ("il 1º e la 2ª", "il primo e la seconda"),
    ("https://example.com/a?b=1", "example punto com slash a punto interrogativo b uguale uno"),
    ("user@example.com", "user chiocciola example punto com"),
    ("10:30", "dieci e trenta"),
    ("3-5 persone", "da tre a cinque persone"),
    ("100 km/h", "cento chilometri orari"),
    ("1 persona", "una persona"),
    ("Sig. Rossi", "signor Rossi"),
    ("1/2", "un mezzo"),
]

PORTUGUESE = [
    ("R$ 100", "cem reais"),
    ("R$ 5,50", "cinco reais e cinquenta centavos"),
    ("$100", "cem dólares"),
    ("75%", "setenta e cinco por cento"),
    ("42", "quarenta e dois"),
    ("3,14", "três vírgula catorze"),
    ("2024-01-15", "quinze de janeiro de dois mil e vinte e quatro"),
    ("HTTP 404", "HTTP quatrocentos e quatro"),
    ("@user", "arroba user"),
    ("#1", "número um"),
    ("A & B", "A e B"),
    ("+55 11 91234-5678", "mais cinquenta e cinco, um um, nove um dois três quatro, cinco seis sete oito"),
    ("o 1º e a 1ª", "o primeiro e a primeira"),
    ("https://example.com/a?b=1", "example ponto com barra a ponto de interrogação b igual um"),
    ("user@example.com", "user arroba example ponto com"),
    ("10:30", "dez e trinta"),
    ("às 2:00", "às duas horas"),
    ("3-5 pessoas", "de três a cinco pessoas"),
    ("2 pessoas", "duas pessoas"),
    ("16", "dezesseis"),
    ("Sr. Silva", "senhor Silva"),
]

RUSSIAN = [
    ("100 ₽", "сто рублей"),
    ("$100", "сто долларов"),
    ("75%", "семьдесят пять процентов"),
    ("42", "сорок два"),
    ("3,14", "три целых четырнадцать сотых"),
    ("2024-01-15", "пятнадцатое января две тысячи двадцать четвёртого года"),
    ("HTTP 404", "HTTP четыреста четыре"),
    ("@user", "собака user"),
    ("#1", "номер один"),
    ("A & B", "A и B"),
    ("+7 495 123-45-67", "плюс семь, четыреста девяносто пять, сто двадцать три, сорок пять, шестьдесят семь"),
    ("1-й, 3-я, 5-го", "первый, третья, пятого"),
    ("https://example.com/a?b=1", "example точка com слэш a вопросительный знак b равно один"),
    ("user@example.com", "user собака example точка com"),
    ("10:30", "десять тридцать"),
    ("10:05", "десять ноль пять"),
    ("3-5 человек", "от трёх до пяти человек"),
    ("2 км и 5 км", "два километра и пять километров"),
    ("21 мин", "двадцать одна минута"),
    ("в 2024 году", "в две тысячи двадцать четвёртом году"),
    ("т.е.", "то есть"),
]

CHINESE = [
    ("$100", "一百美元"),
    ("¥100", "一百元"),
    ("75%", "百分之七十五"),
    ("42", "四十二"),
    ("3.14", "三点一四"),
    ("2024-01-15", "二零二四年一月十五日"),
    ("2024年1月15日", "二零二四年一月十五日"),
    ("HTTP 404", "HTTP 四零四"),
    ("@user", "艾特 user"),
    ("#1", "一号"),
    ("A & B", "A 和 B"),
    ("+86 138 1234 5678", "加八六，幺三八，幺二三四，五六七八"),
    ("第2名", "第二名"),
    ("https://example.com/a?b=1", "example 点 com 斜杠 a 问号 b 等于 一"),
    ("user@example.com", "user at example 点 com"),
    ("10:30", "十点三十分"),
    ("2:05", "两点零五分"),
    ("3-5人", "三到五人"),
    ("1,234", "一千二百三十四"),
    ("2个苹果", "两个苹果"),
    ("1/2", "二分之一"),
    ("25°C", "二十五摄氏度"),
    ("10010", "一万零一十"),
]

JAPANESE = [
    ("$100", "百ドル"),
    ("¥300", "三百円"),
    ("75%", "七十五パーセント"),
    ("42", "四十二"),
    ("3.14", "三点一四"),
    ("2024-01-15", "二千二十四年一月十五日"),
    ("HTTP 404", "HTTP 四百四"),
    ("@user", "アット user"),
    ("#1", "一番"),
    ("A & B", "A アンド B"),
    ("090-1234-5678", "ゼロ九ゼロの一二三四の五六七八"),
    ("第1位", "第一位"),
    ("https://example.com/a?b=1", "example ドット com スラッシュ a クエスチョン b イコール 一"),
    ("user@example.com", "user アットマーク example ドット com"),
    ("10:30", "十時三十分"),
    ("3-5人", "三から五人"),
    ("1,234", "千二百三十四"),
    ("25°C", "二十五度"),
    ("1/2", "二分の一"),
]

KOREAN = [
    ("$100", "백 달러"),
    ("₩1,000", "천 원"),
    ("75%", "칠십오 퍼센트"),
    ("42", "사십이"),
    ("3.14", "삼 점 일사"),
    ("2024-01-15", "이천이십사년 일월 십오일"),
    ("2024년 6월 15일", "이천이십사년 유월 십오일"),
    ("HTTP 404", "HTTP 사공사"),
    ("@user", "앳 user"),
    ("#1", "일 번"),
    ("A & B", "A 앤드 B"),
    ("010-1234-5678", "공일공 일이삼사 오육칠팔"),
    ("1번째, 2번째", "첫번째, 두번째"),
    ("https://example.com/a?b=1", "example 닷 com 슬래시 a 물음표 b 이퀄 일"),
    ("user@example.com", "user 골뱅이 example 닷 com"),
    ("10:30", "열 시 삼십 분"),
    ("3~5개", "세에서 다섯개"),
    ("10-20%", "십에서 이십 퍼센트"),
    ("20살", "스무살"),
    ("100 km/h", "시속 백 킬로미터"),
    ("1/2", "이분의 일"),
]

TABLES = {
    "english": ENGLISH,
    "german": GERMAN,
    "french": FRENCH,
    "spanish": SPANISH,
    "italian": ITALIAN,
    "portuguese": PORTUGUESE,
    "russian": RUSSIAN,
    "chinese": CHINESE,
    "japanese": JAPANESE,
    "korean": KOREAN,
}
CASES = [(language, written, spoken) for language, table in TABLES.items() for written, spoken in table]


@pytest.mark.parametrize(("language", "written", "spoken"), CASES)
def test_spoken_form(language: str, written: str, spoken: str) -> None:
    assert normalize(written, language) == spoken


@pytest.mark.parametrize(("language", "written", "spoken"), CASES)
def test_spoken_form_is_final(language: str, written: str, spoken: str) -> None:
    assert normalize(spoken, language) == spoken


def test_every_language_has_a_table_of_at_least_fifteen() -> None:
    assert set(TABLES) == set(LANGUAGES)
    assert all(len(table) >= 15 for table in TABLES.values())


@pytest.mark.parametrize("language", ["auto", "cantonese", "", "English"])
def test_other_languages_get_whitespace_cleanup_only(language: str) -> None:
    assert normalize("  Pay $5\t now,\n  please  ", language) == "Pay $5 now,\nplease"


@pytest.mark.parametrize("language", LANGUAGES)
def test_unknown_symbols_and_words_stay(language: str) -> None:
    assert normalize("Zorblax ☃ ⟁ qwfp", language) == "Zorblax ☃ ⟁ qwfp"


@pytest.mark.parametrize("language", LANGUAGES)
def test_fullwidth_digits_are_read(language: str) -> None:
    assert normalize("４２", language) == normalize("42", language)


def test_thousands_are_never_dropped() -> None:
    """wetext's English grammar says "1,234" as "thousand two hundred ..." without the "one"."""
    assert normalize("1,234", "english").startswith("one thousand")
    assert normalize("1,234", "chinese") == "一千二百三十四"


WETEXT_AGREES = {
    "chinese": ["$100", "75%", "3.14", "2024年1月15日", "1/2", "2个苹果", "-5", "12:05", "3-5人", "1,000个"],
    "japanese": ["$100", "75%", "3.14", "2024年1月15日", "1/2", "-5", "10:30", "3-5人", "1,234"],
}


@pytest.mark.parametrize("language", WETEXT_AGREES)
def test_agrees_with_wetext_where_wetext_is_right(language: str) -> None:
    from wetext import Normalizer

    wetext = Normalizer(lang={"chinese": "zh", "japanese": "ja"}[language], operator="tn")
    for written in WETEXT_AGREES[language]:
        assert normalize(written, language) == wetext.normalize(written), written


@pytest.mark.parametrize(
    "text", ["1" * 4096, "1-" * 2048, "a1." * 1365, "1." * 2048, "#@$%&+=-/:." * 372, "https://" + "a/" * 2044]
)
def test_long_odd_input_stays_fast(text: str) -> None:
    start = time.perf_counter()
    for language in LANGUAGES:
        normalize(text, language)
    assert time.perf_counter() - start < 5


def test_a_url_is_read_whole_and_its_punctuation_kept_apart() -> None:
    assert normalize("See www.test.org/path!", "english") == "See www dot test dot org slash path!"
    assert normalize("file.py", "english") == "file.py"


def test_thread_safe_first_use() -> None:
    results: dict[str, list[str]] = {language: [] for language in LANGUAGES}

    def speak(language: str) -> None:
        results[language].append(normalize("Pay $5 at 10:30 on 2024-01-15.", language))

    threads = [threading.Thread(target=speak, args=(language,)) for language in LANGUAGES for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(len(set(spoken)) == 1 and len(spoken) == 4 for spoken in results.values())
