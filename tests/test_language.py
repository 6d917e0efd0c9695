"""Language detection: the script pass and lingua for Latin-script text. The labelled sentences double as the
accuracy set of benchmarks/segment_detect_time.py."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from lingua import ConfidenceValue, Language

from qwen3_tts_server.text import language as detection
from qwen3_tts_server.text.language import detect_language
from qwen3_tts_server.text.segment import split_sentences

# 2-5 words: the hard case. None is an acceptable answer for these, a wrong language is not.
LATIN_SHORT = {
    "english": [
        "Good morning, everyone.", "See you tomorrow.", "Where is the station?", "I think so.", "That sounds great!",
        "Thank you very much.", "Yes, please.", "No problem at all.", "It is raining again.", "Please close the door.",
        "What time is it?", "I am very tired.", "Let's go home.", "The food was delicious.", "He never called back.",
        "Happy birthday to you!", "We are almost there.", "Turn left here.",
    ],
    "german": [
        "Guten Morgen zusammen.", "Bis morgen!", "Wo ist der Bahnhof?", "Ich glaube schon.", "Das klingt gut.",
        "Vielen Dank.", "Ja, bitte.", "Kein Problem.", "Es regnet schon wieder.", "Bitte mach die Tür zu.",
        "Wie spät ist es?", "Ich bin sehr müde.", "Lass uns nach Hause gehen.", "Das Essen war lecker.",
        "Er hat nie zurückgerufen.", "Alles Gute zum Geburtstag!", "Wir sind fast da.", "Hier links abbiegen.",
    ],
    "french": [
        "Bonjour à tous.", "À demain !", "Où est la gare ?", "Je pense que oui.", "Ça a l'air génial.",
        "Merci beaucoup.", "Oui, s'il vous plaît.", "Pas de problème.", "Il pleut encore.",
        "Ferme la porte, s'il te plaît.", "Quelle heure est-il ?", "Je suis très fatigué.", "Rentrons à la maison.",
        "Le repas était délicieux.", "Il n'a jamais rappelé.", "Joyeux anniversaire !", "Nous y sommes presque.",
        "Tournez à gauche ici.",
    ],
    "spanish": [
        "Buenos días a todos.", "¡Hasta mañana!", "¿Dónde está la estación?", "Creo que sí.", "Eso suena genial.",
        "Muchas gracias.", "Sí, por favor.", "No hay problema.", "Está lloviendo otra vez.",
        "Cierra la puerta, por favor.", "¿Qué hora es?", "Estoy muy cansado.", "Vamos a casa.",
        "La comida estaba deliciosa.", "Nunca me devolvió la llamada.", "¡Feliz cumpleaños!", "Ya casi llegamos.",
        "Gira a la izquierda aquí.",
    ],
    "portuguese": [
        "Bom dia a todos.", "Até amanhã!", "Onde fica a estação?", "Acho que sim.", "Isso parece ótimo.",
        "Muito obrigado.", "Sim, por favor.", "Não tem problema.", "Está chovendo de novo.",
        "Feche a porta, por favor.", "Que horas são?", "Estou muito cansado.", "Vamos para casa.",
        "A comida estava deliciosa.", "Ele nunca ligou de volta.", "Feliz aniversário!", "Estamos quase lá.",
        "Vire à esquerda aqui.",
    ],
    "italian": [
        "Buongiorno a tutti.", "A domani!", "Dov'è la stazione?", "Penso di sì.", "Sembra fantastico.",
        "Grazie mille.", "Sì, per favore.", "Nessun problema.", "Sta piovendo di nuovo.",
        "Chiudi la porta, per favore.", "Che ore sono?", "Sono molto stanco.", "Andiamo a casa.",
        "Il cibo era delizioso.", "Non ha mai richiamato.", "Buon compleanno!", "Ci siamo quasi.",
        "Gira a sinistra qui.",
    ],
}  # fmt: skip
# 10-20 words: these must all be right.
LATIN_MEDIUM = {
    "english": [
        "The meeting has been moved to Thursday afternoon because the manager is travelling.",
        "Could you please send me the report before the end of the day?",
        "We walked along the river until the sun went down behind the hills.",
        "My brother bought a new car last week, but he hardly ever drives it.",
        "The weather forecast says it will rain heavily over the weekend.",
        "If you need any help with the installation, just give me a call.",
    ],
    "german": [
        "Die Besprechung wurde auf Donnerstagnachmittag verschoben, weil der Chef unterwegs ist.",
        "Kannst du mir bitte den Bericht vor Feierabend schicken?",
        "Wir sind am Fluss entlang spaziert, bis die Sonne hinter den Hügeln unterging.",
        "Mein Bruder hat sich letzte Woche ein neues Auto gekauft, fährt aber kaum damit.",
        "Laut Wetterbericht soll es am Wochenende stark regnen.",
        "Wenn du Hilfe bei der Installation brauchst, ruf mich einfach an.",
    ],
    "french": [
        "La réunion a été déplacée à jeudi après-midi parce que le directeur est en voyage.",
        "Pourriez-vous m'envoyer le rapport avant la fin de la journée ?",
        "Nous avons marché le long de la rivière jusqu'au coucher du soleil.",
        "Mon frère a acheté une nouvelle voiture la semaine dernière, mais il ne la conduit presque jamais.",
        "La météo annonce de fortes pluies pour le week-end.",
        "Si vous avez besoin d'aide pour l'installation, appelez-moi.",
    ],
    "spanish": [
        "La reunión se ha trasladado al jueves por la tarde porque el director está de viaje.",
        "¿Podrías enviarme el informe antes de que termine el día?",
        "Caminamos a lo largo del río hasta que el sol se puso detrás de las colinas.",
        "Mi hermano se compró un coche nuevo la semana pasada, pero casi nunca lo conduce.",
        "El pronóstico dice que lloverá mucho durante el fin de semana.",
        "Si necesitas ayuda con la instalación, llámame.",
    ],
    "portuguese": [
        "A reunião foi transferida para quinta-feira à tarde porque o diretor está viajando.",
        "Você poderia me enviar o relatório antes do fim do dia?",
        "Caminhamos ao longo do rio até o sol se pôr atrás das colinas.",
        "Meu irmão comprou um carro novo na semana passada, mas quase nunca o dirige.",
        "A previsão do tempo diz que vai chover muito no fim de semana.",
        "Se precisar de ajuda com a instalação, é só me ligar.",
    ],
    "italian": [
        "La riunione è stata spostata a giovedì pomeriggio perché il direttore è in viaggio.",
        "Potresti mandarmi la relazione prima della fine della giornata?",
        "Abbiamo camminato lungo il fiume finché il sole non è tramontato dietro le colline.",
        "Mio fratello ha comprato una macchina nuova la settimana scorsa, ma non la guida quasi mai.",
        "Le previsioni dicono che pioverà molto durante il fine settimana.",
        "Se hai bisogno di aiuto con l'installazione, chiamami pure.",
    ],
}
SCRIPT_LANGUAGES = {
    "chinese": ["你好", "今天天气很好。", "我喜欢用Python编程。", "请把报告发给我，谢谢！"],
    "japanese": ["はい", "こんにちは。", "東京大学の学生です。", "明日は雨が降るそうです。"],
    "korean": ["안녕", "안녕하세요.", "오늘 날씨가 정말 좋네요!", "내일 회의는 오후 세 시입니다."],
    "russian": ["Да", "Привет, как дела?", "Я люблю Python.", "Завтра будет дождь, возьми зонт."],
}


def labelled(table: dict[str, list[str]]) -> list[tuple[str, str]]:
    return [(language, text) for language, texts in table.items() for text in texts]


@pytest.mark.parametrize("language, text", labelled(LATIN_MEDIUM) + labelled(SCRIPT_LANGUAGES))
def test_medium_sentences_and_other_scripts_are_recognised(language, text):
    assert detect_language(text) == language


@pytest.mark.parametrize("language, text", labelled(LATIN_SHORT))
def test_a_short_sentence_is_never_given_the_wrong_language(language, text):
    assert detect_language(text) in (language, None)


def test_most_short_sentences_are_recognised():
    answers = [detect_language(text) == language for language, text in labelled(LATIN_SHORT)]
    assert sum(answers) >= 0.85 * len(answers)


@pytest.mark.parametrize(
    "text",
    ["", "   ", "OK", "ok!", "123", "3.14 + 2", "😀🎉", "!!!", "Pizza", "Hello", "Ελληνικά"]
    + ["Dzień dobry, jak się masz?", "Merhaba, bugün nasılsın?", "Xin chào, bạn có khỏe không?"],
)
def test_no_language_when_unsure(text):
    """Too little text, no letters, another script, or letters that none of the six Latin-script languages has."""
    assert detect_language(text) is None


def test_mixed_text_is_detected_per_segment():
    text = "Hello everyone, welcome to the show. 今天我们来聊一聊人工智能。 Let's get started right away."
    detected = [detect_language(sentence) for sentence in split_sentences(text, None)]
    assert detected == ["english", "chinese", "english"]


def test_the_detector_is_built_once_across_threads(monkeypatch):
    builds = []

    class Detector:
        def compute_language_confidence_values(self, text: str) -> list[ConfidenceValue]:
            return [ConfidenceValue(Language.GERMAN, 1.0), ConfidenceValue(Language.ENGLISH, 0.0)]

    def build() -> Detector:
        builds.append(threading.get_ident())
        time.sleep(0.05)
        return Detector()

    monkeypatch.setattr(detection, "_detector", None)
    monkeypatch.setattr(detection, "build_detector", build)
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(detect_language, ["Guten Tag, alle zusammen."] * 16))
    assert answers == ["german"] * 16 and len(builds) == 1


def test_a_one_sentence_text_is_detected_once(monkeypatch):
    """A WebSocket clause is a sentence: the front end detects its language once, not for the text and again
    for its only sentence."""
    from qwen3_tts_server.text import frontend

    calls = []
    monkeypatch.setattr(frontend, "detect_language", lambda text: calls.append(text) or "english")
    frontend.text_segments("A clause that arrived from a language model just now", None, normalize_text=False)
    assert len(calls) == 1
