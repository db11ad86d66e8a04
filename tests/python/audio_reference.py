"""PyTorch side of the audio tests (tests/core/audio_tests.cpp, audio_dataset_tests.cpp,
ecapa_tdnn_tests.cpp): speech-like test signals written with soundfile (libsndfile, as oml-cpp
reads them) and what torchaudio and OML 4.0 compute from them. Nothing is downloaded; every
signal comes from a fixed seed.

    audio_reference.py signals DIR   DIR/<name>.<wav|flac> for each signal below, the samples
                                     soundfile reads back (DIR/<name>_samples.pt, float32
                                     [channels, frames]), their mono mix resampled to 16 kHz by
                                     torchaudio.functional.resample and by transforms.Resample
                                     (DIR/<name>_16k.pt, DIR/<name>_16k_transform.pt), and ECAPA's
                                     front end of the 16 kHz mono signal (DIR/<name>_fbank.pt:
                                     OML's torchfbank, log, mean removal) with torchaudio's
                                     filterbank and window (DIR/mel_fb.pt, DIR/mel_window.pt)
    audio_reference.py ecapa DIR     OML's ECAPATDNNExtractor with random weights (and random
                                     BatchNorm statistics): its state dict as torch.save writes it
                                     (DIR/ecapa_oml.pth, names `model.*`), the same weights as
                                     TaoRuijie publishes them (DIR/ecapa_taoruijie.pth:
                                     `speaker_encoder.*` and `speaker_loss.weight`), a batch of
                                     waveforms (DIR/ecapa_input.pt, [3, 1, 24000]) and OML's
                                     embeddings of it, plain and normalised
                                     (DIR/ecapa_expected.pt, DIR/ecapa_expected_normalised.pt)
    audio_reference.py kaldi DIR     speech-like waveforms (DIR/kaldi_<case>_wave.pt) and
                                     torchaudio.compliance.kaldi.fbank of each with the case's
                                     arguments (KALDI_CASES; DIR/kaldi_<case>.pt)
    audio_reference.py dataset DIR   mono audio files and an audio dataframe DIR/df.csv with
                                     start times, and OML's AudioLabeledDataset's items of its
                                     train rows and AudioQueryGalleryLabeledDataset's of its
                                     validation rows (DIR/train_items.pt, DIR/val_items.pt:
                                     [N, 1, 48000] at 16 kHz, 3 s)

torchaudio 2.11 reads files through TorchCodec, which the tests' environment does not have;
torchaudio.load is replaced here by soundfile's reader, which returns what torchaudio's
soundfile backend returned: float32 [channels, frames], integer PCM scaled to [-1, 1).
"""
import argparse
import sys
from pathlib import Path

import numpy as np
import soundfile
import torch
import torchaudio


def speech_like(seconds, rate, seed, f0=120.0):
    """A voiced signal: a glottal-pulse-like harmonic stack whose pitch glides with vibrato,
    shaped by three moving formant resonances, syllable-rate amplitude envelope, short
    fricative noise bursts, and a pause; float64 in (-1, 1)."""
    rng = np.random.RandomState(seed)
    n = int(seconds * rate)
    t = np.arange(n) / rate
    pitch = f0 * (1.0 + 0.15 * np.sin(2 * np.pi * 0.7 * t) + 0.02 * np.sin(2 * np.pi * 5.5 * t))
    phase = 2 * np.pi * np.cumsum(pitch) / rate
    voiced = np.zeros(n)
    for k in range(1, 40):
        if k * f0 * 1.2 > rate / 2:
            break
        formants = sum(
            np.exp(-(((k * pitch) - (fc + 200 * np.sin(2 * np.pi * 0.9 * t + i))) ** 2) / (2 * bw**2))
            for i, (fc, bw) in enumerate([(700, 120), (1200, 150), (2600, 250)])
        )
        voiced += (0.05 + formants) * np.sin(k * phase) / k
    envelope = 0.5 * (1 - np.cos(2 * np.pi * 3.2 * t)) * (t % 1.3 < 1.05)
    noise = rng.randn(n) * ((t % 0.9) > 0.8) * 0.3
    signal = voiced * envelope + noise + 0.003 * rng.randn(n)
    return 0.8 * signal / np.max(np.abs(signal))


# name: (rate, channels, file format, subtype, seconds)
SIGNALS = {
    "mono16k": (16000, 1, "WAV", "PCM_16", 2.0),
    "stereo44k": (44100, 2, "WAV", "PCM_16", 1.5),
    "mono22k_flac": (22050, 1, "FLAC", "PCM_24", 1.7),
    "mono8k_float": (8000, 1, "WAV", "FLOAT", 2.3),
    "stereo48k_flac": (48000, 2, "FLAC", "PCM_16", 1.2),
}


def write_signal(path, name, rate, channels, fmt, subtype, seconds, seed):
    data = np.stack([speech_like(seconds, rate, seed + c, f0=110.0 + 40 * c) for c in range(channels)], axis=1)
    soundfile.write(str(path), data, rate, format=fmt, subtype=subtype)


def read_samples(path):
    data, rate = soundfile.read(str(path), dtype="float32", always_2d=True)
    return torch.from_numpy(np.ascontiguousarray(data.T)), rate


def torchaudio_load_by_soundfile(path, *args, **kwargs):
    return read_samples(path)


def ecapa_front_end(model, wave):
    """What ECAPA_TDNN.forward computes before conv1 (aug=False)."""
    with torch.no_grad():
        x = model.torchfbank(wave) + 1e-6
        x = x.log()
        return x - torch.mean(x, dim=-1, keepdim=True)


def signals(out):
    from oml.models.audio.ecapa_tdnn.external.model import ECAPA_TDNN

    model = ECAPA_TDNN(C=8).eval()  # the front end does not depend on C
    torch.save(model.torchfbank[1].mel_scale.fb.clone(), out / "mel_fb.pt")
    torch.save(model.torchfbank[1].spectrogram.window.clone(), out / "mel_window.pt")
    for i, (name, (rate, channels, fmt, subtype, seconds)) in enumerate(SIGNALS.items()):
        path = out / f"{name}.{'flac' if fmt == 'FLAC' else 'wav'}"
        write_signal(path, name, rate, channels, fmt, subtype, seconds, seed=10 + 7 * i)
        samples, read_rate = read_samples(path)
        assert read_rate == rate
        torch.save(samples, out / f"{name}_samples.pt")
        mono = samples.mean(dim=0, keepdim=True)
        resampled = torchaudio.functional.resample(mono, rate, 16000)
        torch.save(resampled, out / f"{name}_16k.pt")
        torch.save(torchaudio.transforms.Resample(rate, 16000)(mono), out / f"{name}_16k_transform.pt")
        torch.save(ecapa_front_end(model, resampled), out / f"{name}_fbank.pt")


def randomise_batch_norm_statistics(module, generator):
    for m in module.modules():
        if isinstance(m, torch.nn.BatchNorm1d):
            m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=generator) * 0.1)
            m.running_var.copy_(torch.rand(m.running_var.shape, generator=generator) * 0.5 + 0.75)
            m.weight.data.copy_(1.0 + 0.1 * torch.randn(m.weight.shape, generator=generator))
            m.bias.data.copy_(0.1 * torch.randn(m.bias.shape, generator=generator))


def ecapa(out):
    from oml.models.audio.ecapa_tdnn.extractor import ECAPATDNNExtractor

    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(1)
    extractor = ECAPATDNNExtractor(weights=None, arch="ecapa_tdnn_taoruijie")
    with torch.no_grad():
        randomise_batch_norm_statistics(extractor, generator)
    extractor.eval()
    torch.save(extractor.state_dict(), out / "ecapa_oml.pth")
    published = {"speaker_encoder." + k[len("model.") :]: v for k, v in extractor.state_dict().items()}
    published["speaker_loss.weight"] = torch.randn(5994, 192, generator=generator)
    torch.save(published, out / "ecapa_taoruijie.pth")

    waves = torch.stack(
        [torch.from_numpy(speech_like(1.5, 16000, seed, f0=f0)).float() for seed, f0 in [(3, 100), (4, 180), (5, 240)]]
    )
    waves[2, :4000] = 0.0  # leading silence, as OML's left padding makes
    waves = waves.unsqueeze(1)
    torch.save(waves, out / "ecapa_input.pt")
    with torch.no_grad():
        torch.save(extractor(waves), out / "ecapa_expected.pt")
        normalised = ECAPATDNNExtractor(weights=str(out / "ecapa_oml.pth"), arch="ecapa_tdnn_taoruijie",
                                        normalise_features=True).eval()
        torch.save(normalised(waves), out / "ecapa_expected_normalised.pt")


def dataset(out):
    import pandas as pd
    from oml.datasets.audios import AudioLabeledDataset, AudioQueryGalleryLabeledDataset

    torchaudio.load = torchaudio_load_by_soundfile
    # (file, rate, seconds): longer and shorter than the 3 s OML cuts, at several rates
    files = [("a.wav", 16000, 4.0), ("b.flac", 22050, 5.1), ("c.wav", 8000, 2.0), ("d.wav", 44100, 3.6)]
    for i, (name, rate, seconds) in enumerate(files):
        write_signal(out / name, name, rate, 1, "FLAC" if name.endswith("flac") else "WAV", "PCM_16", seconds,
                     seed=40 + i)
    rows = [
        # label, path, split, is_query, is_gallery, start_time
        (0, "a.wav", "train", "", "", 0.0),
        (0, "a.wav", "train", "", "", 0.75),
        (1, "b.flac", "train", "", "", 1.2345),
        (1, "b.flac", "train", "", "", 4.0),  # runs past the end: cut short, padded on the left
        (2, "c.wav", "train", "", "", 1.5),  # shorter than 3 s: start time ignored, padded
        (2, "d.wav", "train", "", "", None),  # an empty cell: 0
        (3, "d.wav", "validation", True, True, 0.3),
        (3, "b.flac", "validation", True, True, 2.0),
        (4, "c.wav", "validation", False, True, None),
    ]
    df = pd.DataFrame(rows, columns=["label", "path", "split", "is_query", "is_gallery", "start_time"])
    df.to_csv(out / "df.csv", index=False)
    df = pd.read_csv(out / "df.csv")
    train = df[df["split"] == "train"].reset_index(drop=True)
    val = df[df["split"] == "validation"].reset_index(drop=True)
    train_set = AudioLabeledDataset(train, dataset_root=out)
    val_set = AudioQueryGalleryLabeledDataset(val, dataset_root=out)
    torch.save(torch.stack([train_set[i]["input_tensors"] for i in range(len(train_set))]), out / "train_items.pt")
    torch.save(torch.stack([val_set[i]["input_tensors"] for i in range(len(val_set))]), out / "val_items.pt")


# torchaudio.compliance.kaldi.fbank's arguments per case of tests/core/audio_tests.cpp (the C++
# test sets the same ones); the signal's rate is the case's sample_frequency (16 kHz unless set).
KALDI_CASES = {
    "defaults": {},
    "wespeaker": {"num_mel_bins": 80, "window_type": "hamming", "energy_floor": 0.0},
    "energy_htk_edges": {"num_mel_bins": 40, "use_energy": True, "htk_compat": True, "snip_edges": False,
                         "window_type": "hanning", "raw_energy": False, "subtract_mean": True},
    "energy_first": {"use_energy": True, "energy_floor": 0.0},
    "linear_magnitude_blackman": {"use_power": False, "use_log_fbank": False, "window_type": "blackman",
                                  "preemphasis_coefficient": 0.0, "remove_dc_offset": False, "low_freq": 64.0,
                                  "high_freq": -400.0, "round_to_power_of_two": False},
    "rectangular_8k": {"sample_frequency": 8000.0, "frame_length": 20.0, "frame_shift": 8.0,
                       "window_type": "rectangular", "num_mel_bins": 15, "snip_edges": False},
}


def kaldi(out):
    from torchaudio.compliance import kaldi as compliance

    for i, (name, args) in enumerate(KALDI_CASES.items()):
        rate = int(args.get("sample_frequency", 16000.0))
        wave = torch.from_numpy(speech_like(1.37, rate, seed=40 + i)).float().unsqueeze(0)
        torch.save(wave, out / f"kaldi_{name}_wave.pt")
        torch.save(compliance.fbank(wave, **args), out / f"kaldi_{name}.pt")
    # A stereo waveform: channel -1 is the first.
    stereo = torch.from_numpy(np.stack([speech_like(0.9, 16000, 50), speech_like(0.9, 16000, 51)])).float()
    torch.save(stereo, out / "kaldi_stereo_wave.pt")
    torch.save(compliance.fbank(stereo), out / "kaldi_stereo.pt")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["signals", "ecapa", "dataset", "kaldi"])
    parser.add_argument("dir")
    args = parser.parse_args()
    torch.set_num_threads(1)
    out = Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    {"signals": signals, "ecapa": ecapa, "dataset": dataset, "kaldi": kaldi}[args.command](out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
