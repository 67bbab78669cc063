"""The zoo's transformers architectures: small random-init configs built from config classes, nothing downloaded.

Needs: transformers (5.x), torch; zoo_imports.allow_torchvision() already called (importing ember.bench does:
transformers imports torchvision when it is installed).
Guarantees: `SPECS` maps a zoo name (`hf_<model_type>`) to a Spec; `build(spec)` returns (model in eval(), args,
kwargs), the call a user writes, deterministic for a seed set before it.
Why one table: the architectures differ only in their config class, the Auto class that picks the model for
it, the inputs their forward takes and a few config values; what they share (2 layers, hidden 64, 4 heads,
vocabulary 128, batch 2 x sequence 16, as the `models` suite) is written once.
"""
import dataclasses

BATCH, SEQ, VOCAB = 2, 16, 128
TEXT = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128,
        "vocab_size": VOCAB, "max_position_embeddings": 64, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
        "num_key_value_heads": 2, "head_dim": 16}  # grouped-query attention where the model has it
SEQ2SEQ = {**TEXT, "d_model": 64, "encoder_layers": 2, "decoder_layers": 2, "encoder_ffn_dim": 128,
           "decoder_ffn_dim": 128, "encoder_attention_heads": 4, "decoder_attention_heads": 4,
           "decoder_start_token_id": 0}
T5 = {"num_layers": 2, "num_decoder_layers": 2, "d_model": 64, "d_ff": 128, "num_heads": 4, "d_kv": 16,
      "vocab_size": VOCAB, "pad_token_id": 0, "eos_token_id": 1, "decoder_start_token_id": 0}
IMAGE = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128,
         "image_size": 32, "patch_size": 8, "num_channels": 3}
STAGES = {"num_channels": 3, "hidden_sizes": [16, 32, 64, 128], "depths": [1, 1, 1, 1]}
AUDIO = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128,
         "conv_dim": (32, 32, 32), "conv_stride": (5, 2, 2), "conv_kernel": (10, 3, 3),
         "num_conv_pos_embeddings": 16, "num_conv_pos_embedding_groups": 4, "vocab_size": 32}
WHISPER = {**SEQ2SEQ, "num_mel_bins": 16, "max_source_positions": 16, "max_target_positions": 32,
           "decoder_start_token_id": 0}
AUDIO_SAMPLES, IMAGE_SIZE = 2000, 32


@dataclasses.dataclass(frozen=True)
class Spec:
    model_type: str  # the key of transformers.CONFIG_MAPPING
    family: str  # decoder, encoder, encoder-decoder, vision, speech: the inputs and the Auto class
    config: dict


def _decoder(model_type, **extra):
    return Spec(model_type, "decoder", {**TEXT, **extra})


def _encoder(model_type, **extra):
    return Spec(model_type, "encoder", {**TEXT, **extra})


def _seq2seq(model_type, base=SEQ2SEQ, **extra):
    return Spec(model_type, "encoder-decoder", {**base, **extra})


_SPECS = [
    # decoders (AutoModelForCausalLM, use_cache=False)
    *(_decoder(t) for t in ("gpt2", "gpt_neox", "opt", "llama", "mistral", "qwen2", "qwen3", "phi",
                            "phi3", "gemma", "gemma2", "bloom", "stablelm", "starcoder2",
                            "olmo", "olmo2", "cohere", "gpt_bigcode", "xglm", "biogpt", "mpt", "persimmon",
                            "granite")),
    *(_decoder(t, rotary_dim=8) for t in ("gptj", "codegen")),
    Spec("falcon", "decoder", {k: v for k, v in TEXT.items() if k != "head_dim"}),  # head_dim is derived there
    _decoder("mixtral", num_local_experts=4, num_experts_per_tok=2),
    _decoder("gpt_neo", num_layers=2, attention_types=[[["global", "local"], 1]], window_size=8),
    # encoders (AutoModel, with a padding mask)
    *(_encoder(t) for t in ("bert", "roberta", "distilbert", "albert", "electra", "deberta", "deberta-v2",
                            "xlm-roberta", "mpnet", "convbert", "mobilebert", "ernie", "roformer", "modernbert",
                            "camembert", "data2vec-text")),
    # encoder-decoders (AutoModel, with decoder inputs)
    *(_seq2seq(t) for t in ("bart", "mbart", "pegasus", "marian", "blenderbot-small", "m2m_100", "plbart")),
    *(_seq2seq(t, base=T5) for t in ("t5", "mt5", "umt5")),
    # vision (AutoModel, pixel values)
    *(Spec(t, "vision", IMAGE) for t in ("vit", "deit", "beit", "dinov2", "data2vec-vision")),
    Spec("convnext", "vision", STAGES),
    Spec("convnextv2", "vision", STAGES),
    Spec("resnet", "vision", {**STAGES, "embedding_size": 16}),
    Spec("swin", "vision", {"image_size": IMAGE_SIZE, "patch_size": 4, "embed_dim": 16, "depths": [1, 1],
                            "num_heads": [2, 2], "window_size": 4, "num_channels": 3}),
    Spec("clip_vision_model", "vision", IMAGE),
    Spec("siglip_vision_model", "vision", IMAGE),
    # speech
    *(Spec(t, "speech", AUDIO) for t in ("wav2vec2", "hubert", "wavlm", "data2vec-audio")),
    Spec("whisper", "speech-seq2seq", WHISPER),
]
SPECS = {"hf_" + s.model_type.replace("-", "_"): s for s in _SPECS}


def _ids(gen, batch=BATCH):
    import torch
    return torch.randint(3, VOCAB, (batch, SEQ), generator=gen)


def _mask():
    import torch
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    mask[1, SEQ - 4:] = 0  # the second sequence is padded: the mask changes the result
    return mask


def build(spec):
    import torch
    import transformers
    config = transformers.CONFIG_MAPPING[spec.model_type](**spec.config)
    gen = torch.Generator().manual_seed(1)
    if spec.family == "decoder":
        model = transformers.AutoModelForCausalLM.from_config(config)
        return model.eval(), (_ids(gen),), {"use_cache": False}
    model = transformers.AutoModel.from_config(config).eval()
    if spec.family == "encoder":
        return model, (_ids(gen),), {"attention_mask": _mask()}
    if spec.family == "encoder-decoder":
        return model, (_ids(gen),), {"attention_mask": _mask(), "decoder_input_ids": _ids(gen), "use_cache": False}
    if spec.family == "vision":
        return model, (torch.randn(1, 3, IMAGE_SIZE, IMAGE_SIZE, generator=gen),), {}
    if spec.family == "speech":
        return model, (torch.randn(1, AUDIO_SAMPLES, generator=gen),), {}
    if spec.family == "speech-seq2seq":
        features = torch.randn(1, config.num_mel_bins, 2 * config.max_source_positions, generator=gen)
        return model, (features,), {"decoder_input_ids": _ids(gen, batch=1), "use_cache": False}
    raise ValueError(f"unknown transformers family {spec.family!r}")
