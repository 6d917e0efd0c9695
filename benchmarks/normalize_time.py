"""Cost of text normalisation: time per 100 characters, first-call cost per language, and what the number
libraries add to start-up time and memory.

    .venv/bin/python benchmarks/normalize_time.py [--repeats 200]

Per language: the median time to normalise a realistic mixed paragraph (money, dates, times, units, a phone
number, a web address...), per 100 characters of input, and the first call's cost in a fresh process (its
language module, compiled rules and num2words loaded on the way). Then, each in a fresh process, the import
time and resident memory added by num2words (used) and wetext (measured for comparison: not loaded by the
normaliser, see qwen3_tts_server/text/normalize/english.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

from qwen3_tts_server.text.normalize import LANGUAGES, normalize
from qwen3_tts_server.text.normalize.language import spell

PARAGRAPHS = {
    "english": "On 2024-01-15 at 10:30 pm, Dr. Smith paid $1,234.56 (15% off) for 3-5 kg of coffee. Call "
    "+1 555 123 4567 or write to sales@example.com; see https://example.com/a?b=1 for the 1st/2nd/3rd prizes. "
    "It was 25°C in 1990, HTTP 404 & #1 on 100 km/h roads.",
    "german": "Am 15.01.2024 um 10:30 zahlte Dr. Müller 1.234,56 € (15 % Rabatt) für 3-5 kg Kaffee. Rufen "
    "Sie +49 30 1234567 an oder schreiben Sie an verkauf@example.de; siehe https://example.de/a?b=1 für den "
    "3. Platz. Es waren 25 °C im Jahr 1990, HTTP 404 & Nr. 1 bei 100 km/h.",
    "french": "Le 15/01/2024 à 10h30, Mme Dupont a payé 1 234,56 € (15 % de remise) pour 3-5 kg de café. "
    "Appelez le 01 23 45 67 89 ou écrivez à ventes@example.fr ; voir https://example.fr/a?b=1 pour la 1re "
    "place. Il faisait 25 °C en 1990, HTTP 404 & #1 à 100 km/h.",
    "spanish": "El 15/01/2024 a las 10:30, el Sr. García pagó 1.234,56 € (15 % de descuento) por 3-5 kg de "
    "café. Llame al +34 912 345 678 o escriba a ventas@example.es; vea https://example.es/a?b=1 para el 1.º "
    "puesto. Hacía 25 °C en 1990, HTTP 404 & #1 a 100 km/h.",
    "italian": "Il 15/01/2024 alle 10:30 il Sig. Rossi ha pagato 1.234,56 € (sconto del 15%) per 3-5 kg di "
    "caffè. Chiami il +39 06 1234 5678 o scriva a vendite@example.it; veda https://example.it/a?b=1 per il "
    "1º posto. C'erano 25 °C nel 1990, HTTP 404 & #1 a 100 km/h.",
    "portuguese": "Em 15/01/2024 às 10:30, o Sr. Silva pagou R$ 1.234,56 (15% de desconto) por 3-5 kg de "
    "café. Ligue para +55 11 91234-5678 ou escreva para vendas@example.com.br; veja https://example.com.br/a?b=1 "
    "para o 1º lugar. Fazia 25 °C em 1990, HTTP 404 & #1 a 100 km/h.",
    "russian": "15.01.2024 в 10:30 доктор Иванов заплатил 1 234,56 ₽ (скидка 15%) за 3-5 кг кофе. Звоните "
    "+7 495 123-45-67 или пишите на sales@example.ru; см. https://example.ru/a?b=1 про 1-е место. Было 25 °C "
    "в 1990 году, HTTP 404 & #1 на 100 км/ч.",
    "chinese": "2024年1月15日10:30，张医生花了¥1,234.56（打八五折，省了15%）买了3-5kg咖啡。请拨打+86 138 1234 "
    "5678或发邮件到sales@example.cn，详见https://example.cn/a?b=1，第1名有奖。1990年气温25°C，HTTP 404 & #1，"
    "时速100km/h。",
    "japanese": "2024年1月15日10:30、田中さんは¥1,234でコーヒーを3-5kg買いました（15%引き）。090-1234-5678に"
    "電話するか、sales@example.jpにメールしてください。詳細はhttps://example.jp/a?b=1、第1位。1990年は25°C、"
    "HTTP 404 & #1、100km/h。",
    "korean": "2024년 1월 15일 10:30에 김 박사는 커피 3~5kg을 ₩12,345(15% 할인)에 샀습니다. 010-1234-5678로 "
    "전화하거나 sales@example.kr로 메일을 보내세요. 자세한 내용은 https://example.kr/a?b=1, 1번째 상. "
    "1990년 기온은 25°C, HTTP 404 & #1, 100 km/h, 사과 3개.",
}

_FRESH_PROCESS = r"""
import json, sys, time
def rss_mib():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024
what = sys.argv[1]
before, start = rss_mib(), time.perf_counter()
if what == "num2words":
    import num2words
    imported = time.perf_counter()
    num2words.num2words(1234, lang="en")
elif what == "wetext":
    import wetext
    imported = time.perf_counter()
    wetext.Normalizer(lang="zh", operator="tn").normalize("1")
else:
    from qwen3_tts_server.text.normalize import normalize
    imported = time.perf_counter()
    normalize("Pay $5 on 2024-01-15.", what)
done = time.perf_counter()
print(json.dumps({"import_s": imported - start, "first_use_s": done - imported, "rss_mib": rss_mib() - before}))
"""


def fresh(what: str) -> dict[str, float]:
    """Cost of importing and first using `what` (a library or a language) in a new interpreter."""
    output = subprocess.run([sys.executable, "-c", _FRESH_PROCESS, what], check=True, capture_output=True, text=True)
    return json.loads(output.stdout)


def per_100_chars(language: str, repeats: int, cached: bool) -> float:
    """Median seconds per 100 characters; uncached: every number is new to num2words' cache."""
    text = PARAGRAPHS[language]
    normalize(text, language)
    times = []
    for _ in range(repeats):
        if not cached:
            spell.cache_clear()
        start = time.perf_counter()
        normalize(text, language)
        times.append(time.perf_counter() - start)
    return statistics.median(times) / len(text) * 100


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()

    print(f"{'language':<12}{'chars':>7}{'ms/100 chars':>14}{'uncached':>10}{'first call ms':>15}{'+ RSS MiB':>11}")
    for language in LANGUAGES:
        first = fresh(language)
        warm, cold = (per_100_chars(language, args.repeats, cached) * 1e3 for cached in (True, False))
        print(
            f"{language:<12}{len(PARAGRAPHS[language]):>7}{warm:>14.3f}{cold:>10.3f}"
            f"{first['first_use_s'] * 1e3:>15.1f}{first['rss_mib']:>11.1f}"
        )
    print(f"\n{'library':<12}{'import ms':>12}{'first use ms':>14}{'+ RSS MiB':>11}")
    for library in ("num2words", "wetext"):
        cost = fresh(library)
        print(f"{library:<12}{cost['import_s'] * 1e3:>12.1f}{cost['first_use_s'] * 1e3:>14.1f}{cost['rss_mib']:>11.1f}")
    print("\nms/100 chars: median over repeats of the paragraph (uncached: num2words' cache cleared before each);")
    print("first call: the first normalize() in a fresh process, after importing the package (num2words loads on")
    print("the first call that needs it); + RSS: resident memory added by the import and that call.")


if __name__ == "__main__":
    main()
