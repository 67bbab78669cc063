"""The real models of the `models` suite and of tests/models: transformers' GPT-2, BERT, LLaMA and T5 with tiny
random-init configs (never a download), and Ember's nanoGPT.

Every model is built the same way from the same seed (torch.manual_seed before construction), in eval() mode,
so a fresh process (the suite's cold-compile probe) builds the same weights as the suite's process. Sizes
follow issue 4: 2 layers, hidden size 64, 4 heads, vocabulary 128, batch 2, sequence 16.

`build(name)` -> Workload(model, args, kwargs, description). The call `model(*args, **kwargs)` is the one a
user writes: `use_cache=False` for the decoders (no cache object is built or returned), an attention mask for
BERT and T5, T5 with its decoder inputs.
"""
import dataclasses

LAYERS, HIDDEN, HEADS, VOCAB, BATCH, SEQ = 2, 64, 4, 128, 2, 16
SEED = 0


@dataclasses.dataclass
class Workload:
    model: object
    args: tuple
    kwargs: dict
    description: str


def _ids(seed):
    import torch
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)


def _mask():
    import torch
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    mask[1, SEQ - 4:] = 0  # the second sequence is padded: the mask changes the result
    return mask


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    config = GPT2Config(n_layer=LAYERS, n_embd=HIDDEN, n_head=HEADS, vocab_size=VOCAB, n_positions=64,
                        bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(config)


def bert():
    from transformers import BertConfig, BertModel
    config = BertConfig(num_hidden_layers=LAYERS, hidden_size=HIDDEN, num_attention_heads=HEADS, vocab_size=VOCAB,
                        intermediate_size=4 * HIDDEN, max_position_embeddings=64)
    return BertModel(config)


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    config = LlamaConfig(num_hidden_layers=LAYERS, hidden_size=HIDDEN, num_attention_heads=HEADS,
                         num_key_value_heads=HEADS // 2, vocab_size=VOCAB, intermediate_size=4 * HIDDEN,
                         max_position_embeddings=64, bos_token_id=0, eos_token_id=0)
    return LlamaForCausalLM(config)


def t5():
    from transformers import T5Config, T5Model
    config = T5Config(num_layers=LAYERS, d_model=HIDDEN, num_heads=HEADS, d_kv=HIDDEN // HEADS, d_ff=4 * HIDDEN,
                      vocab_size=VOCAB, decoder_start_token_id=0)
    return T5Model(config)


def nanogpt():
    from ember.models.nanogpt import GPT, GPTConfig
    return GPT(GPTConfig(block_size=64, vocab_size=VOCAB, n_layer=LAYERS, n_head=HEADS, n_embd=HIDDEN))


# name -> (constructor, description, call): call(ids, mask) -> (args, kwargs)
MODELS = {
    "gpt2": (gpt2, "transformers GPT2LMHeadModel", lambda ids, mask: ((ids,), {"use_cache": False})),
    "bert": (bert, "transformers BertModel with an attention mask",
             lambda ids, mask: ((ids,), {"attention_mask": mask})),
    "llama": (llama, "transformers LlamaForCausalLM (grouped-query attention)",
              lambda ids, mask: ((ids,), {"use_cache": False})),
    "t5": (t5, "transformers T5Model (encoder-decoder) with an attention mask",
           lambda ids, mask: ((ids,), {"attention_mask": mask, "decoder_input_ids": _ids(SEED + 2),
                                       "use_cache": False})),
    "nanogpt": (nanogpt, "Ember's nanoGPT", lambda ids, mask: ((ids,), {})),
}


def build(name):
    import torch
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(MODELS)}")
    make, description, call = MODELS[name]
    torch.manual_seed(SEED)
    model = make().eval()
    args, kwargs = call(_ids(SEED + 1), _mask())
    return Workload(model, args, kwargs, description)


def tensors_of(out):
    """The tensors of a model's output, in order: a tensor, a tuple, or a ModelOutput (its non-None values)."""
    import torch
    if isinstance(out, torch.Tensor):
        return [out]
    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    if isinstance(out, (tuple, list)):
        return [t for x in out for t in tensors_of(x)]
    if out is None:
        return []
    raise TypeError(f"a model output of type {type(out).__name__} holds no tensors Ember can compare")
