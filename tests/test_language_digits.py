"""Language detection of digit-heavy text (issue 61): phone numbers, dates, times, prices, versions, addresses and
ordinals with a few words of the language. Numbers and what is written with them (units, currency signs,
suffixes) tell nothing of the language: the words around them decide, or nobody does."""

from __future__ import annotations

import pytest

from qwen3_tts_server.text.frontend import text_segments
from qwen3_tts_server.text.language import detect_language, words

ISSUE_TEXT = "+1 (555) 010-0199 ext. 42, call before 5 pm"

# Per language: a phone number, a date, a time, a price, a version, an address, an ordinal.
DIGIT_HEAVY = {
    "english": [
        ISSUE_TEXT,
        "The invoice dated 03/15/2024 is due on 04/01/2024.",
        "The train leaves at 7:45 and arrives at 10:20.",
        "It costs $19.99, or $17.50 with the discount.",
        "Version 2.3.1 was released on 2024-05-01.",
        "She lives at 221B Baker Street, London NW1 6XE.",
        "He finished 3rd out of 120 runners on the 2nd of May.",
    ],
    "german": [
        "Rufen Sie uns unter +49 30 1234567 an, Durchwahl 42.",
        "Die Rechnung vom 15.03.2024 ist bis zum 01.04.2024 fällig.",
        "Der Zug fährt um 7:45 Uhr ab und kommt um 10:20 Uhr an.",
        "Das kostet 19,99 €, mit Rabatt nur 17,50 €.",
        "Version 2.3.1 erscheint am 1. Mai 2024.",
        "Sie wohnt in der Hauptstraße 12, 10115 Berlin.",
        "Er wurde 3. von 120 Läufern am 2. Mai.",
    ],
    "french": [
        "Appelez le 01 23 45 67 89 avant 17 h.",
        "La facture du 15/03/2024 est à régler avant le 01/04/2024.",
        "Le train part à 7 h 45 et arrive à 10 h 20.",
        "Ça coûte 19,99 €, ou 17,50 € avec la remise.",
        "La version 2.3.1 sort le 1er mai 2024.",
        "Elle habite au 12, rue de la Paix, 75002 Paris.",
        "Il est arrivé 3e sur 120 coureurs le 2 mai.",
    ],
    "spanish": [
        "Llame al +34 912 345 678, extensión 42, antes de las 17:00.",
        "La factura del 15/03/2024 vence el 01/04/2024.",
        "El tren sale a las 7:45 y llega a las 10:20.",
        "Cuesta 19,99 €, o 17,50 € con el descuento.",
        "La versión 2.3.1 sale el 1 de mayo de 2024.",
        "Vive en la calle Mayor 12, 28013 Madrid.",
        "Quedó 3.º de 120 corredores el 2 de mayo.",
    ],
    "portuguese": [
        "Ligue para +55 11 98765-4321, ramal 42, até às 17h.",
        "A fatura de 15/03/2024 vence em 01/04/2024.",
        "O trem sai às 7:45 e chega às 10:20.",
        "Custa R$ 19,99, ou R$ 17,50 com o desconto.",
        "A versão 2.3.1 sai em 1 de maio de 2024.",
        "Ela mora na Rua Augusta, 1200, São Paulo, 01304-001.",
        "Ele chegou em 3º lugar entre 120 corredores no dia 2 de maio.",
    ],
    "italian": [
        "Chiami il numero +39 06 1234 5678, interno 42, entro le 17.",
        "La fattura del 15/03/2024 scade il 01/04/2024.",
        "Il treno parte alle 7:45 e arriva alle 10:20.",
        "Costa 19,99 €, oppure 17,50 € con lo sconto.",
        "La versione 2.3.1 esce il 1° maggio 2024.",
        "Abita in via Roma 12, 00184 Roma.",
        "È arrivato 3º su 120 corridori il 2 maggio.",
    ],
    "chinese": [
        "请拨打 +86 10 1234 5678 转 42。",
        "发票日期为2024年3月15日。",
        "火车7:45出发，10:20到达。",
        "售价19.99元，打折后17.50元。",
        "版本2.3.1于2024-05-01发布。",
        "地址：北京市海淀区中关村大街27号。",
        "他在120名选手中获得第3名。",
    ],
    "japanese": [
        "03-1234-5678（内線42）までお電話ください。",
        "請求書の日付は2024年3月15日です。",
        "電車は7:45に出発します。",
        "価格は1,980円です。",
        "バージョン2.3.1は2024-05-01に公開されました。",
        "東京都千代田区千代田1-1にあります。",
        "120人中3位でした。",
    ],
    "korean": [
        "02-123-4567 내선 42번으로 전화하세요.",
        "청구서 날짜는 2024년 3월 15일입니다.",
        "기차는 7:45에 출발합니다.",
        "가격은 19,900원입니다.",
        "버전 2.3.1은 2024-05-01에 출시되었습니다.",
        "서울시 중구 세종대로 110에 있습니다.",
        "120명 중 3위를 했습니다.",
    ],
    "russian": [
        "Звоните +7 495 123-45-67, доб. 42, до 17:00.",
        "Счёт от 15.03.2024 оплатить до 01.04.2024.",
        "Поезд отправляется в 7:45.",
        "Цена 1 999,99 ₽.",
        "Версия 2.3.1 вышла 01.05.2024.",
        "ул. Тверская, д. 12, кв. 5, Москва 125009",
        "Он занял 3-е место из 120.",
    ],
}
# Two or three words beside the numbers, most of them abbreviations or units: None is fine, a wrong language is
# not. Before the numbers' letters and signs were left out and two words needed a wider margin, the first three
# were German, French and Italian.
THIN = {
    "english": [
        "12 kg, 3.5 lbs, 20 oz",
        "Fax: +1 212 555 0100, Suite 5",
        "Tel. 555-0199, ext. 42",
        "Open 9 am - 5 pm, Mon-Fri",
        "v2.3.1 (2024-05-01): 12 fixes",
        "Dial 911 or +1 800 555 0199",
        "Due 04/01/2024, total $1,234.56",
        "1st, 2nd and 3rd place",
        "Room 101, 2nd floor",
        "Flight BA 117, Gate 22, 10:45 am",
    ],
    "spanish": ["Llame al 912 345 678", "Vence el 01/04/2024: 1.234,56 €", "Habitación 101, 2.º piso"],
    "german": ["Tel. +49 30 1234567, Durchwahl 42", "Mo-Fr 9-17 Uhr, Sa 10-14 Uhr", "Zimmer 101, 2. Stock"],
    "french": ["Tél. : 01 23 45 67 89, poste 42", "Chambre 101, 2e étage", "Ouvert dès 19 h 30"],
    "portuguese": ["Quarto 101, 2º andar", "Ligue para (11) 98765-4321", "Vence em 01/04/2024: R$ 1.234,56"],
    "italian": ["Tel. +39 06 1234 5678, interno 42", "Camera 101, 2° piano", "Scade il 01/04/2024: 1.234,56 €"],
}


def labelled(table: dict[str, list[str]]) -> list[tuple[str, str]]:
    return [(language, text) for language, texts in table.items() for text in texts]


@pytest.mark.parametrize("language, text", labelled(DIGIT_HEAVY))
def test_digit_heavy_text_is_detected_as_its_language(language, text):
    assert detect_language(text) == language


@pytest.mark.parametrize("language, text", labelled(THIN))
def test_numbers_with_a_few_weak_words_never_get_the_wrong_language(language, text):
    assert detect_language(text) in (language, None)


@pytest.mark.parametrize(
    "text, found",
    [
        (ISSUE_TEXT, ["ext", "call", "before", "pm"]),
        ("3rd, 1er, 18h30, Q3, v2.3.1, $1.2M, NW1 6XE", []),
        ("12 kg, 3.5 lbs, 120 km/h, 20 °C, 15%", []),
        ("USD 5, 5 EUR, R$ 9,99, 19,99 €", []),
        ("Le 3 mai à 18 h 30", ["Le", "mai", "à"]),  # "mai" is no unit sign, "h" after a number is
    ],
)
def test_numbers_and_what_is_written_with_them_are_not_words(text, found):
    assert words(text) == found


@pytest.mark.parametrize("language", [None, "auto", "Auto"])
def test_the_issue_text_is_spoken_in_english(language):
    """What /v1/audio/speech does with no language or Auto: the front end's segments."""
    segments = text_segments(ISSUE_TEXT, language, normalize_text=True)
    assert [segment.language for segment in segments] == ["english"]
    assert segments[0].text.startswith("plus one, five five five")


def test_sentences_too_short_to_tell_take_the_whole_text_language():
    """The splitter ends a sentence at "Tel.", and "+49 30 1234567, Durchwahl 42" alone has one word."""
    segments = text_segments("Tel. +49 30 1234567, Durchwahl 42", None, normalize_text=True)
    assert {segment.language for segment in segments} == {"german"}


@pytest.mark.parametrize("text", ["+1 (555) 010-0199", "15/03/2024 10:30", "12 kg, 3.5 lbs"])
def test_text_without_words_is_left_to_auto_and_read_in_english(text):
    """No language to detect: the model's Auto decides, and the numbers are read in English words."""
    assert detect_language(text) is None
    segments = text_segments(text, None, normalize_text=True)
    assert {segment.language for segment in segments} == {"auto"}
    assert not any(char.isdigit() for segment in segments for char in segment.text)
