"""Safe media loading: normalisation of modes/channels/rates and typed failures."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from PIL import Image

from mmverify.core.media import MediaError, MediaLimits, MediaReason, load_audio, load_image, resample
from tests.conftest import raw_png


def _png_bytes(image: Image.Image, fmt: str = "PNG", **kwargs) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **kwargs)
    return buffer.getvalue()


@pytest.mark.parametrize("mode", ["RGB", "RGBA", "L", "LA", "P", "CMYK", "1"])
def test_every_mode_becomes_uint8_rgb(mode: str):
    image = Image.new("RGB", (16, 9), (10, 200, 30)).convert(mode)
    fmt = "JPEG" if mode == "CMYK" else "PNG"
    array = load_image(_png_bytes(image, fmt))
    assert array.shape == (9, 16, 3) and array.dtype == np.uint8 and array.flags.c_contiguous


def test_rgba_drops_alpha_and_keeps_colour():
    image = Image.new("RGBA", (4, 4), (0, 128, 0, 10))
    assert load_image(_png_bytes(image))[0, 0].tolist() == [0, 128, 0]


def test_sixteen_bit_grayscale_is_scaled_not_clipped():
    wide = np.full((4, 4), 65535, dtype=np.uint16)
    wide[0, 0] = 0
    array = load_image(_png_bytes(Image.fromarray(wide)))
    assert array[1, 1].tolist() == [255, 255, 255] and array[0, 0].tolist() == [0, 0, 0]


def test_animated_gif_gives_first_frame():
    frames = [Image.new("RGB", (8, 8), c) for c in ((255, 0, 0), (0, 0, 255))]
    buffer = io.BytesIO()
    frames[0].save(buffer, format="GIF", save_all=True, append_images=frames[1:])
    assert load_image(buffer.getvalue())[0, 0].tolist() == [255, 0, 0]


@pytest.mark.parametrize(
    "payload, reason",
    [
        (b"", MediaReason.EMPTY),
        (b"definitely not an image", MediaReason.UNDECODABLE),
        (None, MediaReason.UNDECODABLE),  # truncated PNG, filled in below
    ],
)
def test_bad_images_raise_typed_errors(payload, reason):
    if payload is None:
        payload = _png_bytes(Image.new("RGB", (64, 64), (1, 2, 3)))[:60]
    with pytest.raises(MediaError) as info:
        load_image(payload)
    assert info.value.reason == reason


def _png_header_only(width: int, height: int) -> bytes:
    """A PNG whose header claims huge dimensions (a decompression bomb never decoded)."""
    return raw_png(width, height, 8, 2, b"\x00" * 16)


def test_huge_dimension_header_is_refused_before_decoding():
    with pytest.raises(MediaError) as info:
        load_image(_png_header_only(100_000, 100_000))
    assert info.value.reason == MediaReason.TOO_LARGE
    with pytest.raises(MediaError) as info:
        load_image(_png_bytes(Image.new("RGB", (100, 100))), MediaLimits(max_pixels=5000))
    assert info.value.reason == MediaReason.TOO_LARGE


def test_missing_and_oversized_files(tmp_path: Path):
    with pytest.raises(MediaError) as info:
        load_image(tmp_path / "absent.png")
    assert info.value.reason == MediaReason.MISSING
    path = tmp_path / "big.png"
    path.write_bytes(_png_bytes(Image.new("RGB", (50, 50))))
    with pytest.raises(MediaError) as info:
        load_image(path, MediaLimits(max_bytes=10))
    assert info.value.reason == MediaReason.TOO_LARGE
    with pytest.raises(MediaError) as info:  # a folder where a file was named: the user's problem, typed
        load_audio(tmp_path)
    assert info.value.reason == MediaReason.MISSING and "cannot read" in info.value.message


def _wav(samples: np.ndarray, rate: int, subtype: str = "FLOAT") -> bytes:
    buffer = io.BytesIO()
    sf.write(buffer, samples, rate, format="WAV", subtype=subtype)
    return buffer.getvalue()


def test_stereo_is_averaged_and_resampled():
    t = np.arange(16000) / 16000
    left = 0.5 * np.sin(2 * np.pi * 440 * t)
    stereo = np.stack([left, np.zeros_like(left)], axis=1).astype(np.float32)
    mono, rate = load_audio(_wav(stereo, 16000))
    assert rate == 16000 and mono.dtype == np.float32 and mono.shape == (16000,)
    np.testing.assert_allclose(mono, left / 2, atol=1e-6)
    resampled, rate = load_audio(_wav(stereo, 16000), sample_rate=48000)
    assert rate == 48000 and abs(len(resampled) - 48000) <= 1
    # the 440 Hz tone survives resampling: its spectral peak stays at 440 Hz
    spectrum = np.abs(np.fft.rfft(resampled))
    assert abs(np.argmax(spectrum) * 48000 / len(resampled) - 440) < 2


@pytest.mark.parametrize("fmt", ["FLAC", "OGG"])
def test_compressed_formats_decode(fmt: str):
    buffer = io.BytesIO()
    sf.write(buffer, np.zeros(8000, dtype=np.float32) + 0.1, 8000, format=fmt)
    mono, rate = load_audio(buffer.getvalue())
    assert rate == 8000 and len(mono) == 8000


def test_bad_audio_raises_typed_errors():
    with pytest.raises(MediaError) as info:
        load_audio(_wav(np.array([0.0, np.nan, 0.1], dtype=np.float32), 8000))
    assert info.value.reason == MediaReason.INVALID_SAMPLES
    with pytest.raises(MediaError) as info:
        load_audio(b"RIFF\x00\x00\x00\x00WAVEjunk")
    assert info.value.reason == MediaReason.UNDECODABLE
    with pytest.raises(MediaError) as info:
        load_audio(_wav(np.zeros(0, dtype=np.float32), 8000))
    assert info.value.reason in (MediaReason.EMPTY, MediaReason.UNDECODABLE)
    with pytest.raises(MediaError) as info:
        load_audio(_wav(np.zeros(8000, dtype=np.float32), 8000), limits=MediaLimits(max_seconds=0.5))
    assert info.value.reason == MediaReason.TOO_LARGE


def test_a_sample_rate_over_the_limit_is_refused_before_resampling():
    # an odd rate resamples through a filter as long as the rates' reduced ratio (5,000,011 Hz to
    # 16 kHz: 10**8 taps); the header alone must refuse it
    header_only = _wav(np.zeros(10, dtype=np.float32), 5_000_011)
    with pytest.raises(MediaError) as info:
        load_audio(header_only, sample_rate=16_000)
    assert info.value.reason == MediaReason.TOO_LARGE and "5000011 Hz" in info.value.message
    with pytest.raises(MediaError):
        load_audio(_wav(np.zeros(10, dtype=np.float32), 8001), limits=MediaLimits(max_sample_rate=8000))
    audio, rate = load_audio(_wav(np.zeros(10, dtype=np.float32), 384_000))  # the default limit itself passes
    assert rate == 384_000 and audio.size == 10


def test_resample_identity_and_length():
    signal = np.random.default_rng(0).normal(size=1000).astype(np.float32)
    assert resample(signal, 8000, 8000) is signal
    assert len(resample(signal, 8000, 16000)) == 2000


@pytest.mark.parametrize("rates", [(22050, 48000), (44100, 48000), (48000, 16000), (24000, 16000), (8000, 22050), (44100, 22050)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16])
def test_resample_gives_the_bytes_of_scipys_resample_poly(rates, dtype):
    """The filter is designed once per rate pair instead of per call: the output must not move a bit."""
    from math import gcd

    from scipy.signal import resample_poly

    source, target = rates
    divisor = gcd(source, target)
    rng = np.random.default_rng(source + target)
    for length in (1, 9, 4410, 33_333):
        signal = (rng.normal(size=length) * (3000 if dtype is np.int16 else 0.3)).astype(dtype)
        expected = resample_poly(signal, target // divisor, source // divisor).astype(np.float32)
        for _ in range(2):  # the second call uses the stored filter
            assert resample(signal, source, target).tobytes() == expected.tobytes()


def test_decode_errors_carry_no_object_addresses():
    """Messages end up in result rows, which must be byte-identical between processes."""
    from mmverify.core.media import MediaError, load_image

    messages = set()
    for _ in range(2):
        with pytest.raises(MediaError) as info:
            load_image(b"definitely not an image")
        messages.add(str(info.value))
    assert len(messages) == 1 and " at 0x" not in messages.pop()


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "WEBP", "GIF", "BMP", "TIFF"])
def test_raster_formats_a_generator_writes_are_decoded(fmt: str):
    assert load_image(_png_bytes(Image.new("RGB", (8, 6), (200, 10, 10)), fmt)).shape == (6, 8, 3)


@pytest.mark.parametrize("fmt", ["ICO", "PPM", "TGA", "DDS", "PCX", "SGI"])
def test_other_formats_pillow_knows_are_not_opened(fmt: str):
    with pytest.raises(MediaError) as info:
        load_image(_png_bytes(Image.new("RGB", (8, 6), (200, 10, 10)), fmt))
    assert info.value.reason == MediaReason.UNDECODABLE and "cannot identify" in info.value.message


def test_eps_never_reaches_ghostscript(monkeypatch):
    from PIL import EpsImagePlugin

    def opened(self: object) -> None:
        raise AssertionError("the EPS decoder was asked to open the payload")

    monkeypatch.setattr(EpsImagePlugin.EpsImageFile, "_open", opened)
    eps = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n0 0 moveto 10 10 lineto stroke\nshowpage\n%%EOF\n"
    with pytest.raises(MediaError) as info:
        load_image(eps)
    assert info.value.reason == MediaReason.UNDECODABLE


def test_a_decoder_without_support_for_a_variant_is_an_undecodable_image(monkeypatch):
    from PIL import PngImagePlugin

    def unsupported(self: object) -> None:
        raise NotImplementedError("Unknown pixel format flags 0")  # as Pillow's DDS decoder said of a mutated file

    monkeypatch.setattr(PngImagePlugin.PngImageFile, "load", unsupported)
    with pytest.raises(MediaError) as info:
        load_image(_png_bytes(Image.new("RGB", (8, 6))))
    assert info.value.reason == MediaReason.UNDECODABLE and "Unknown pixel format" in info.value.message


def test_many_channels_at_a_high_rate_are_refused_at_the_header():
    """A few MB of compressed silence can decode to GBs: the limit counts samples of all channels."""
    buffer = io.BytesIO()
    sf.write(buffer, np.zeros((384_000, 8), dtype=np.int16), 384_000, format="FLAC", subtype="PCM_16")
    assert len(buffer.getvalue()) < 100_000  # one second of 8 channels at 384 kHz, compressed
    with pytest.raises(MediaError) as info:
        load_audio(buffer.getvalue(), limits=MediaLimits(max_samples=384_000 * 8 - 1))
    assert info.value.reason == MediaReason.TOO_LARGE and "8 channels x 384000 frames" in info.value.message
    assert load_audio(buffer.getvalue(), limits=MediaLimits(max_samples=384_000 * 8))[0].size == 384_000


def test_block_by_block_downmix_equals_the_whole_array_mean():
    rng = np.random.default_rng(5)
    samples = rng.uniform(-1, 1, size=(3 * 65_536 + 123, 6)).astype(np.float32)
    buffer = io.BytesIO()
    sf.write(buffer, samples, 48_000, format="WAV", subtype="FLOAT")
    mono, rate = load_audio(buffer.getvalue())
    whole = sf.read(io.BytesIO(buffer.getvalue()), dtype="float32", always_2d=True)[0].mean(axis=1, dtype=np.float32)
    assert rate == 48_000 and mono.tobytes() == whole.tobytes()
    samples[-1, 3] = np.inf  # a bad sample in the last block is still found
    sf.write(bad := io.BytesIO(), samples, 48_000, format="WAV", subtype="FLOAT")
    with pytest.raises(MediaError) as info:
        load_audio(bad.getvalue())
    assert info.value.reason == MediaReason.INVALID_SAMPLES


def test_a_header_that_understates_the_length_cannot_pass_the_sample_limit():
    from mmverify.core.media import _read_mono

    class Lying:  # claims 10 frames, then decodes on and on
        frames = 10

        def __init__(self, channels: int) -> None:
            self.channels = channels

        def read(self, count, dtype, always_2d):
            return np.zeros((1000 if count < 0 else count, self.channels), dtype=np.float32)

    for channels in (2, 3):  # one read, or block by block
        with pytest.raises(MediaError) as info:
            _read_mono(Lying(channels), MediaLimits(max_samples=999))
        assert info.value.reason == MediaReason.TOO_LARGE


def _whole_mean(data: bytes) -> np.ndarray:
    """The channels' mean of the file decoded in one read (as this loader always did)."""
    with sf.SoundFile(io.BytesIO(data)) as handle:
        return handle.read(dtype="float32", always_2d=True).mean(axis=1, dtype=np.float32)


@pytest.mark.parametrize("subtype", ["PCM_U8", "PCM_16", "PCM_24", "PCM_32", "FLOAT", "DOUBLE"])
@pytest.mark.parametrize("channels", [1, 2, 3, 8])
def test_the_downmix_equals_the_whole_array_mean_for_every_layout(subtype, channels):
    samples = np.random.default_rng(channels).uniform(-0.9, 0.9, size=(300_000, channels))
    buffer = io.BytesIO()
    sf.write(buffer, samples, 16_000, format="WAV", subtype=subtype)
    assert load_audio(buffer.getvalue())[0].tobytes() == _whole_mean(buffer.getvalue()).tobytes()


def test_mp3_is_decoded_in_one_read():
    """mpg123 gives other samples when read in pieces: mono and stereo files are read whole."""
    rng = np.random.default_rng(0)
    for channels in (1, 2):
        buffer = io.BytesIO()
        sf.write(buffer, rng.uniform(-0.5, 0.5, size=(200_000, channels)), 22_050, format="MP3")
        assert load_audio(buffer.getvalue())[0].tobytes() == _whole_mean(buffer.getvalue()).tobytes()


def test_an_image_decoder_failing_in_an_unexpected_way_is_undecodable_media(monkeypatch: pytest.MonkeyPatch):
    from PIL import ImageFile

    def broken(self: ImageFile.ImageFile) -> None:
        raise TypeError("'float' object cannot be interpreted as an integer")  # as Pillow did on a fuzzed TIFF

    monkeypatch.setattr(ImageFile.ImageFile, "load", broken)
    with pytest.raises(MediaError) as info:
        load_image(_png_bytes(Image.new("RGB", (8, 8))))
    assert info.value.reason == MediaReason.UNDECODABLE and "TypeError" in info.value.message


def test_an_item_timeout_inside_an_image_decoder_is_not_turned_into_a_media_error(monkeypatch: pytest.MonkeyPatch):
    from PIL import ImageFile

    from mmverify.pipelines.execute import ItemTimeout

    def late(self: ImageFile.ImageFile) -> None:
        raise ItemTimeout()  # as the deadline watchdog raises it, between two bytecodes of Pillow's

    monkeypatch.setattr(ImageFile.ImageFile, "load", late)
    with pytest.raises(ItemTimeout):
        load_image(_png_bytes(Image.new("RGB", (8, 8))))
