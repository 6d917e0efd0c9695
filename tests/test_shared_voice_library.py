"""One voice library directory shared by several processes (replicas on NFS or a ReadWriteMany volume): each sees
the others' voices, never speaks one another has deleted (whatever its prompt cache holds), and a process that
starts sweeps no staging folder a writer still holds."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest
import torch

from qwen3_tts_server.errors import NotFoundError
from qwen3_tts_server.model.tts.voice_prompt import VoicePrompt
from qwen3_tts_server.service.speech.voice_library import PromptCache, VoiceLibrary


def prompt(seed: int) -> VoicePrompt:
    embedding = torch.randn(8, generator=torch.Generator().manual_seed(seed))
    return VoicePrompt(id=f"voice_{seed:032x}", mode="x_vector", checkpoint="test", speaker_embedding=embedding)


def replica(data_dir) -> VoiceLibrary:
    return VoiceLibrary(data_dir, PromptCache(8))


def test_a_voice_added_by_one_library_is_spoken_by_another_until_a_third_deletes_it(tmp_path):
    uploader, speaker, deleter = replica(tmp_path), replica(tmp_path), replica(tmp_path)
    voice = uploader.add("Shared", prompt(1))

    assert [v.id for v in speaker.list()] == [voice.id] and speaker.get(voice.id) == voice
    spoken = speaker.clone_prompt(speaker.get(voice.id))
    assert torch.equal(spoken.speaker_embedding, prompt(1).speaker_embedding)
    assert speaker.cache.get(voice.prompt_id, count=False) is not None

    assert deleter.delete(voice.id) == voice
    assert speaker.find(voice.id) is None and speaker.list() == [] and uploader.list() == []
    assert speaker.cache.get(voice.prompt_id, count=False) is not None  # still cached, never served
    with pytest.raises(NotFoundError):
        speaker.clone_prompt(voice)  # a StoredVoice a request resolved before the delete
    with pytest.raises(NotFoundError):
        uploader.delete(voice.id)  # deleted twice: 404, not an OSError
    assert not list((tmp_path / "voices").iterdir())


def test_a_voice_deleted_by_another_process_is_not_served_from_the_prompt_cache(tmp_path):
    library = replica(tmp_path)
    voice = library.add("Elsewhere", prompt(2))
    kept = library.add("Kept", prompt(3))
    assert library.clone_prompt(voice).id == prompt(2).id  # cached
    script = (
        "import sys\nfrom qwen3_tts_server.service.speech.voice_library import PromptCache, VoiceLibrary\n"
        "VoiceLibrary(sys.argv[1], PromptCache(0)).delete(sys.argv[2])"
    )
    subprocess.run([sys.executable, "-c", script, str(tmp_path), voice.id], check=True, timeout=120)

    with pytest.raises(NotFoundError):
        library.clone_prompt(voice)
    assert library.find(voice.id) is None and [v.id for v in library.list()] == [kept.id]
    assert library.clone_prompt(kept).id == prompt(3).id


def test_a_starting_library_sweeps_leftovers_but_not_a_voice_being_written(tmp_path, monkeypatch):
    writer = replica(tmp_path)
    root = tmp_path / "voices"
    writing, release = threading.Event(), threading.Event()
    save = VoicePrompt.save

    def slow_save(self, path):
        save(self, path)
        writing.set()
        assert release.wait(60)

    monkeypatch.setattr(VoicePrompt, "save", slow_save)
    added = []
    thread = threading.Thread(target=lambda: added.append(writer.add("Being written", prompt(4))))
    thread.start()
    try:
        assert writing.wait(60)
        (root / ".incoming-voice_crashed").mkdir()  # what a writer killed mid-upload leaves
        (root / ".deleted-voice_crashed").mkdir()
        starting = replica(tmp_path)
        staged = sorted(path.name for path in root.iterdir())
        # Its staging folder and lock, and the names' lock it holds while it writes (names are unique).
        incoming = [name for name in staged if name != ".names.lock"]
        assert ".names.lock" in staged and len(incoming) == 2, staged
        assert all(name.startswith(".incoming-voice_") for name in incoming), staged
    finally:
        release.set()
        thread.join(60)
    assert [v.id for v in starting.list()] == [added[0].id]
    assert sorted(path.name for path in root.iterdir()) == [added[0].id]  # no lock file left either
