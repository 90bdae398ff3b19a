"""Random-init checkpoints of the real architectures, made and saved locally, for tests and benchmarks.

Each builder saves a folder that loads the way a user's checkpoint does (``save_pretrained`` with
its processor), with tiny layers so that a forward pass costs milliseconds on a CPU.  Nothing is
downloaded; random weights give gibberish transcripts and arbitrary embeddings, which is enough to
check plumbing, batching, determinism and speed.
"""

from __future__ import annotations

from pathlib import Path

CLAP_SAMPLE_RATE = 48_000
WHISPER_SPECIALS = [
    "<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|zh|>", "<|translate|>", "<|transcribe|>",
    "<|startoflm|>", "<|startofprev|>", "<|nocaptions|>", "<|notimestamps|>",
]  # fmt: skip


def build_tiny_clap(folder: Path, fusion: bool = False, seed: int = 0, real_front_end: bool = False) -> Path:
    """Save a random-init ClapModel with tiny text/audio towers, its feature extractor and tokenizer.

    The feature extractor keeps the real checkpoint's 48 kHz, 10 s window, "rand_trunc" truncation
    and repeat-padding; a coarser hop and fewer mel bins keep the spectrogram small, unless
    ``real_front_end`` asks for laion/clap-htsat-unfused's own (64 mel bands, 480-sample hop).
    """
    from mmverify.envfix import install_torchvision_op_stubs

    install_torchvision_op_stubs()
    import torch
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import ClapConfig, ClapFeatureExtractor, ClapModel, ClapProcessor, RobertaTokenizer

    # Byte-level BPE with no merges: every byte is a token, as in RoBERTa's base alphabet.
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 4}
    for symbol in sorted(ByteLevel.alphabet()):
        vocab[symbol] = len(vocab)
    tokenizer = RobertaTokenizer(vocab=vocab, merges=[])
    config = ClapConfig(
        text_config=dict(
            vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
            intermediate_size=32, max_position_embeddings=66, projection_dim=16,
        ),
        audio_config=dict(
            spec_size=256 if real_front_end else 64, num_mel_bins=64 if real_front_end else 16,
            window_size=8 if real_front_end else 4, depths=[1, 1], num_attention_heads=[1, 2],
            patch_embeds_hidden_size=8, hidden_size=16, projection_dim=16, enable_fusion=fusion,
        ),
        projection_dim=16,
    )
    torch.manual_seed(seed)
    model = ClapModel(config).eval()
    extractor = ClapFeatureExtractor(
        feature_size=64 if real_front_end else 16, sampling_rate=CLAP_SAMPLE_RATE, hop_length=480 if real_front_end else 4800,
        max_length_s=10, fft_window_size=1024, frequency_min=50, frequency_max=14_000,
        truncation="fusion" if fusion else "rand_trunc", padding="repeatpad",
    )
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    ClapProcessor(feature_extractor=extractor, tokenizer=tokenizer).save_pretrained(folder)
    return folder


def build_tiny_hf_whisper(folder: Path, seed: int = 0, max_length: int = 448) -> Path:
    """A random-init WhisperForConditionalGeneration with a byte-level tokenizer and Whisper's
    special tokens, plus the generation config fields ``generate`` needs to force language/task.
    ``max_length`` bounds every decode (random weights rarely stop on their own)."""
    from mmverify.envfix import install_torchvision_op_stubs

    install_torchvision_op_stubs()
    import torch
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import (
        GenerationConfig,
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperProcessor,
        WhisperTokenizer,
    )

    vocab = {symbol: i for i, symbol in enumerate(sorted(ByteLevel.alphabet()))}
    merges = [("Ġ", "t"), ("h", "e"), ("Ġt", "he")]
    for left, right in merges:
        vocab[left + right] = len(vocab)
    tokenizer = WhisperTokenizer(vocab=vocab, merges=merges)
    tokenizer.add_special_tokens({"additional_special_tokens": WHISPER_SPECIALS[1:]})
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in WHISPER_SPECIALS}
    eot, sot = ids["<|endoftext|>"], ids["<|startoftranscript|>"]
    config = WhisperConfig(
        vocab_size=len(tokenizer), d_model=64, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=128, decoder_ffn_dim=128,
        num_mel_bins=80, max_source_positions=1500, max_target_positions=448,
        pad_token_id=eot, bos_token_id=eot, eos_token_id=eot, decoder_start_token_id=sot,
        init_std=0.5,  # large random weights make the output depend on the input
    )
    torch.manual_seed(seed)
    model = WhisperForConditionalGeneration(config).eval()
    model.generation_config = GenerationConfig(
        decoder_start_token_id=sot, bos_token_id=eot, eos_token_id=eot, pad_token_id=eot, max_length=max_length,
        is_multilingual=True, no_timestamps_token_id=ids["<|notimestamps|>"],
        lang_to_id={"<|en|>": ids["<|en|>"], "<|zh|>": ids["<|zh|>"]},
        task_to_id={"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]},
        # as in real checkpoints, control tokens are never sampled as text
        suppress_tokens=[ids[token] for token in WHISPER_SPECIALS[1:]], begin_suppress_tokens=[eot],
    )
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    WhisperProcessor(feature_extractor=WhisperFeatureExtractor(), tokenizer=tokenizer).save_pretrained(folder)
    return folder
