"""Cost of the text front end's segmentation and language detection, and the lingua mode behind detection.

    .venv/bin/python benchmarks/segment_detect_time.py [--repeats 7]

Per language, on a paragraph of about 400 characters and on 4096 characters of it repeated: the median time
per 100 characters of split_sentences, speech_segments, IncrementalSegmenter fed 4-character tokens, and
detect_language on each sentence of the paragraph (after a warm-up, so the detector is built). Then each lingua
mode considered, each in a fresh subprocess: build time, first call, RSS added by the build and after the
labelled sentences of tests/test_language.py, median and slowest call, and accuracy on those sentences
(right / None / wrong, 2-5 word and 10-20 word sentences). Prints tables.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from qwen3_tts_server.text.language import build_detector, detect_language, latin_language  # noqa: E402
from qwen3_tts_server.text.segment import IncrementalSegmenter, speech_segments, split_sentences  # noqa: E402
from test_language import LATIN_MEDIUM, LATIN_SHORT  # noqa: E402

PARAGRAPHS = {
    "english": (
        "Dr. Smith called at 3 p.m. to confirm the appointment. She said the results, e.g. the blood tests, look "
        "fine. The bill comes to $1,234.50, which the U.S. insurer covers in full! Wait... are you sure? Yes: "
        "the clinic confirmed it twice — once by phone and once by e-mail. We can relax now, and plan the trip "
        "to Rome in May, when the weather is warm but not yet too hot."
    ),
    "german": (
        "Dr. Müller hat um 15 Uhr angerufen, um den Termin zu bestätigen. Die Ergebnisse, z.B. die Blutwerte, "
        "sind gut. Die Rechnung über 1.234,50 Euro übernimmt die Versicherung vollständig! Wirklich? Ja: Die "
        "Praxis hat es zweimal bestätigt — einmal am Telefon und einmal per E-Mail. Wir können uns also "
        "entspannen und die Reise nach Rom im Mai planen, wenn es warm, aber noch nicht zu heiß ist."
    ),
    "french": (
        "M. Dupont a appelé à 15 h pour confirmer le rendez-vous. Il a dit que les résultats, p.ex. les analyses "
        "de sang, sont bons. La facture de 1 234,50 euros est entièrement remboursée ! Vraiment ? Oui : le "
        "cabinet l'a confirmé deux fois — une fois par téléphone et une fois par courriel. Nous pouvons donc "
        "nous détendre et préparer le voyage à Rome en mai, quand il fait chaud sans être étouffant."
    ),
    "spanish": (
        "El Sr. García llamó a las 3 de la tarde para confirmar la cita. Dijo que los resultados, p.ej. los "
        "análisis de sangre, están bien. ¡La factura de 1.234,50 euros la cubre el seguro por completo! "
        "¿De verdad? Sí: la clínica lo confirmó dos veces — una por teléfono y otra por correo. Podemos "
        "relajarnos y planear el viaje a Roma en mayo, cuando hace calor pero todavía no demasiado."
    ),
    "portuguese": (
        "O Sr. Silva ligou às 15h para confirmar a consulta. Ele disse que os resultados, p.ex. os exames de "
        "sangue, estão bons. A conta de 1.234,50 euros é paga pelo seguro na íntegra! Sério? Sim: a clínica "
        "confirmou duas vezes — uma por telefone e outra por e-mail. Podemos relaxar e planejar a viagem a "
        "Roma em maio, quando faz calor mas ainda não demais."
    ),
    "italian": (
        "Il Sig. Rossi ha chiamato alle 15 per confermare l'appuntamento. Ha detto che i risultati, p.es. le "
        "analisi del sangue, vanno bene. La fattura di 1.234,50 euro è coperta interamente dall'assicurazione! "
        "Davvero? Sì: lo studio l'ha confermato due volte — una per telefono e una per e-mail. Possiamo "
        "rilassarci e organizzare il viaggio a Roma a maggio, quando fa caldo ma non ancora troppo."
    ),
    "russian": (
        "Доктор Смирнов позвонил в 15 часов, чтобы подтвердить приём. Он сказал, что результаты, т.е. анализы "
        "крови, в порядке. Счёт на 1 234,50 рубля страховая оплатит полностью! Правда? Да: клиника "
        "подтвердила это дважды — по телефону и по почте. Мы можем расслабиться и спланировать поездку в Рим "
        "в мае, когда уже тепло, но ещё не жарко."
    ),
    "chinese": (
        "史密斯医生下午三点打电话确认了预约。他说检查结果，比如血液化验，都很正常。一千二百三十四块五的账单"
        "由保险公司全额支付！真的吗？是的：诊所确认了两次，一次通过电话，一次通过邮件。我们可以放松一下，"
        "计划五月去罗马旅行，那时天气温暖但还不太热。"
    ),
    "japanese": (
        "スミス先生が午後三時に電話で予約を確認しました。検査結果、例えば血液検査は問題ないそうです。"
        "千二百三十四ドル五十セントの請求は保険で全額支払われます！本当ですか？はい、クリニックが電話と"
        "メールで二回確認しました。これで安心して、暖かいけれどまだ暑すぎない五月にローマ旅行を計画できます。"
    ),
    "korean": (
        "스미스 박사가 오후 세 시에 전화해서 예약을 확인했습니다. 검사 결과, 예를 들어 혈액 검사는 괜찮다고 "
        "합니다. 천이백삼십사 달러 오십 센트의 청구서는 보험에서 전액 지불합니다! 정말요? 네: 병원에서 "
        "전화로 한 번, 이메일로 한 번, 두 번 확인했습니다. 이제 안심하고 따뜻하지만 아직 덥지 않은 오월에 "
        "로마 여행을 계획할 수 있습니다."
    ),
}
# (high accuracy, preloaded models) by name; the module's choice is high-preload.
MODES = {
    "high-preload": (True, True),
    "high-lazy": (True, False),
    "low-preload": (False, True),
    "low-lazy": (False, False),
}
LONG = 4096
TOKEN = 4


def median_time(call: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def per_100(call: Callable[[], object], chars: int, repeats: int) -> float:
    """Median milliseconds per 100 characters."""
    return median_time(call, repeats) * 1e5 / chars


def stretched(text: str, length: int) -> str:
    return ((text + " ") * (length // len(text) + 1))[:length]


def fed(text: str) -> list[str]:
    segmenter = IncrementalSegmenter()
    segments = [segment for i in range(0, len(text), TOKEN) for segment in segmenter.feed(text[i : i + TOKEN])]
    return [*segments, segmenter.flush()]


def segmentation_rows(repeats: int) -> list[dict]:
    detect_language(PARAGRAPHS["english"])  # builds the detector
    rows = []
    for language, text in PARAGRAPHS.items():
        long = stretched(text, LONG)
        sentences = split_sentences(text, language)
        rows.append(
            {
                "language": language,
                "split": per_100(lambda t=text, lang=language: split_sentences(t, lang), len(text), repeats),
                "split_4096": per_100(lambda t=long, lang=language: split_sentences(t, lang), LONG, repeats),
                "segments_4096": per_100(lambda t=long, lang=language: speech_segments(t, lang), LONG, repeats),
                "incremental_4096": per_100(lambda t=long: fed(t), LONG, repeats),
                "detect": per_100(lambda s=sentences: [detect_language(x) for x in s], len(text), repeats),
                "sentences": len(sentences),
                "detected": sorted({str(detect_language(sentence)) for sentence in sentences}),
            }
        )
    return rows


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmRSS"))


def accuracy(detector, table: dict[str, list[str]], times: list[float]) -> dict[str, int]:
    counts = {"right": 0, "none": 0, "wrong": 0}
    for language, texts in table.items():
        for text in texts:
            start = time.perf_counter()
            answer = latin_language(text, detector)
            times.append(time.perf_counter() - start)
            counts["right" if answer == language else "none" if answer is None else "wrong"] += 1
    return counts


def measure_mode(mode: str) -> dict:
    """One lingua mode, in this (fresh) process."""
    high_accuracy, preload = MODES[mode]
    before = rss_mb()
    start = time.perf_counter()
    detector = build_detector(high_accuracy, preload)
    build = time.perf_counter() - start
    built = rss_mb()
    start = time.perf_counter()
    latin_language("Bonjour à tous, comment allez-vous aujourd'hui ?", detector)
    first = time.perf_counter() - start
    times: list[float] = []
    short, medium = accuracy(detector, LATIN_SHORT, times), accuracy(detector, LATIN_MEDIUM, times)
    used = rss_mb()
    warm: list[float] = []
    accuracy(detector, LATIN_SHORT, warm), accuracy(detector, LATIN_MEDIUM, warm)
    return {
        "mode": mode,
        "build_ms": build * 1e3,
        "first_call_ms": first * 1e3,
        "rss_build_mb": built - before,
        "rss_used_mb": used - before,
        "median_call_us": statistics.median(warm) * 1e6,
        "slowest_call_ms": max(times) * 1e3,
        "short": short,
        "medium": medium,
    }


def print_table(header: list[str], rows: list[list]) -> None:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    for row in [header, *rows]:
        print("  ".join(str(cell).rjust(width) for cell, width in zip(row, widths, strict=True)))
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--mode", choices=MODES, help="measure one lingua mode and print it as JSON (internal)")
    args = parser.parse_args()
    if args.mode:
        print(json.dumps(measure_mode(args.mode)))
        return

    print(f"ms per 100 characters (median of {args.repeats}); paragraph ~400 characters, long = {LONG}")
    rows = segmentation_rows(args.repeats)
    header = ["language", "split", f"split {LONG}", f"segments {LONG}", f"incremental {LONG}", "detect", "sentences"]
    keys = ["split", "split_4096", "segments_4096", "incremental_4096", "detect"]
    print_table(header, [[r["language"], *(f"{r[k]:.3f}" for k in keys), r["sentences"]] for r in rows])
    for row in rows:
        print(f"  {row['language']}: detected {', '.join(row['detected'])}")
    print()

    modes = []
    for mode in MODES:
        command = [sys.executable, __file__, "--mode", mode]
        modes.append(json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout))
    total = sum(len(texts) for texts in LATIN_SHORT.values()), sum(len(texts) for texts in LATIN_MEDIUM.values())
    print("lingua, six Latin-script languages, min relative distance; fresh process per mode")
    print(f"accuracy right/None/wrong on {total[0]} short (2-5 words) and {total[1]} medium (10-20 words) sentences")
    header = ["mode", "build ms", "1st call ms", "RSS build MB", "RSS used MB", "call us", "slowest ms"]
    header += ["short", "medium"]
    print_table(
        header,
        [
            [
                m["mode"],
                f"{m['build_ms']:.0f}",
                f"{m['first_call_ms']:.0f}",
                f"{m['rss_build_mb']:.0f}",
                f"{m['rss_used_mb']:.0f}",
                f"{m['median_call_us']:.0f}",
                f"{m['slowest_call_ms']:.1f}",
                "/".join(str(v) for v in m["short"].values()),
                "/".join(str(v) for v in m["medium"].values()),
            ]
            for m in modes
        ],
    )


if __name__ == "__main__":
    main()
