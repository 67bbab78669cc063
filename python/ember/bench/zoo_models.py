"""The zoo's catalogue: timm, torchvision, transformers and diffusers models, each built small and random-init.

Needs: timm, torchvision, diffusers and transformers importable (the Makefile pins them); importing
ember.bench put zoo_imports' torchvision stand-in in place first.
Guarantees: `MODELS` maps a zoo name (`timm_*`, `tv_*`, `hf_*`, `diffusers_*`) to an Entry; `build(name)`
returns a models_workloads.Workload (model in eval(), args, kwargs, description) built after
torch.manual_seed(SEED), so every process (the suite, its fresh-process probes, the tests) gets the same
weights and inputs. Nothing is downloaded: every model comes from its constructor or config class.
Why these sizes: one model should cost a few ms per call on the two-core development machine, so that the
whole zoo runs in one sitting: images are batch 1 x 3 x 64 x 64 (transformers' vision models 32 x 32 with
small configs), classifiers have 10 classes, transformers models are 2 layers of width 64.
"""
import dataclasses

from . import zoo_transformers
from .models_workloads import Workload

SEED = 0
IMAGE = (1, 3, 64, 64)

# timm: the name, and whether the constructor takes img_size (ViTs and hybrids whose position tables or
# windows follow it; the CNNs take any size)
TIMM_CNNS = ["resnet18", "resnet50", "resnet10t", "seresnext26d_32x4d", "ecaresnet26t", "skresnet18",
             "resnest14d", "regnetx_002", "regnety_002", "densenet121", "dla34", "dpn48b", "cspresnet50",
             "ese_vovnet19b_dw", "efficientnet_b0", "efficientnetv2_rw_t", "tf_efficientnet_lite0",
             "mobilenetv2_050", "mobilenetv3_small_050", "mobilenetv3_large_100", "mobilenetv4_conv_small",
             "mnasnet_small", "fbnetc_100", "ghostnet_100", "ghostnetv2_100", "lcnet_050", "hardcorenas_a",
             "tinynet_e", "rexnet_100", "spnasnet_100", "mixnet_s", "hgnetv2_b0", "convnext_atto",
             "convnextv2_atto", "inception_next_atto", "nf_resnet26", "hrnet_w18_small", "fastvit_t8",
             "edgenext_xx_small", "starnet_s050", "pvt_v2_b0", "poolformer_s12", "poolformerv2_s12",
             "efficientvit_b0", "tiny_vit_5m_224"]
TIMM_SIZED = ["resnext26ts", "repvgg_a0", "mobileone_s0", "gernet_s", "lambda_resnet26t", "efficientformerv2_s0",
              "mobilevit_xxs", "mobilevitv2_050", "levit_128s", "repvit_m0_9",
              "vit_tiny_patch16_224", "deit_tiny_patch16_224", "cait_xxs24_224", "xcit_nano_12_p16_224",
              "pit_ti_224", "swin_tiny_patch4_window7_224", "maxvit_nano_rw_256", "coatnet_nano_rw_224",
              "convit_tiny", "visformer_tiny", "eva02_tiny_patch14_224", "gcvit_xxtiny", "efficientvit_m0",
              "twins_pcpvt_small", "nest_tiny",
              "mixer_s16_224", "resmlp_12_224", "gmlp_ti16_224", "gmixer_12_224"]
TORCHVISION = ["resnet18", "resnet34", "resnet50", "resnext50_32x4d", "mobilenet_v2", "mobilenet_v3_small",
               "mobilenet_v3_large", "mnasnet0_5", "mnasnet1_0", "shufflenet_v2_x0_5", "shufflenet_v2_x1_0",
               "squeezenet1_0", "squeezenet1_1", "densenet121", "efficientnet_b0", "efficientnet_b1",
               "efficientnet_v2_s", "regnet_x_400mf", "regnet_y_400mf", "regnet_x_800mf", "regnet_y_800mf",
               "googlenet", "alexnet", "convnext_tiny", "swin_t", "swin_v2_t"]


@dataclasses.dataclass(frozen=True)
class Entry:
    library: str
    family: str  # cnn, vit, mlp-mixer, hybrid, decoder, encoder, encoder-decoder, vision, speech, diffusion
    make: object  # () -> (model, args, kwargs)
    description: str


def _image():
    import torch
    return torch.randn(*IMAGE, generator=torch.Generator().manual_seed(SEED + 1))


def _timm(name, sized):
    def make():
        import timm
        model = timm.create_model(name, pretrained=False, num_classes=10, **({"img_size": IMAGE[-1]} if sized else {}))
        return model, (_image(),), {}
    return make


def _torchvision(name):
    def make():
        import torchvision.models
        return torchvision.models.get_model(name, weights=None, num_classes=10), (_image(),), {}
    return make


def _timm_family(name):
    for prefix, family in (("mixer", "mlp-mixer"), ("resmlp", "mlp-mixer"), ("gmlp", "mlp-mixer"),
                           ("gmixer", "mlp-mixer"), ("vit_", "vit"), ("deit", "vit"), ("cait", "vit"),
                           ("xcit", "vit"), ("pit", "vit"), ("swin", "vit"), ("eva", "vit"), ("twins", "vit"),
                           ("nest", "vit"), ("pvt", "vit"), ("tiny_vit", "vit"), ("maxvit", "hybrid"),
                           ("coatnet", "hybrid"), ("convit", "hybrid"), ("visformer", "hybrid"),
                           ("gcvit", "hybrid"), ("efficientvit", "hybrid"), ("mobilevit", "hybrid"),
                           ("levit", "hybrid"), ("efficientformer", "hybrid"), ("edgenext", "hybrid"),
                           ("fastvit", "hybrid"), ("poolformer", "hybrid")):
        if name.startswith(prefix):
            return family
    return "cnn"


def _randn(gen, *shape):
    import torch
    return torch.randn(*shape, generator=gen)


def _diffusers(kind):
    """Small diffusers models and blocks: UNets, autoencoders, a transformer block, a DiT."""
    def make():
        import torch
        import diffusers
        from diffusers.models.resnet import ResnetBlock2D
        g = torch.Generator().manual_seed(SEED + 1)
        t = torch.tensor([10])
        small = {"block_out_channels": (32, 64), "norm_num_groups": 8, "layers_per_block": 1}
        context = _randn(g, 1, 8, 32)
        if kind == "unet2d":
            model = diffusers.UNet2DModel(sample_size=16, in_channels=3, out_channels=3,
                                          down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                                          up_block_types=("AttnUpBlock2D", "UpBlock2D"), **small)
            return model, (_randn(g, 1, 3, 16, 16), t), {}
        if kind == "unet2d_condition":
            model = diffusers.UNet2DConditionModel(sample_size=16, in_channels=4, out_channels=4,
                                                   down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                                   up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
                                                   cross_attention_dim=32, attention_head_dim=8, **small)
            return model, (_randn(g, 1, 4, 16, 16), t, context), {}
        if kind in ("vae", "vq"):
            blocks = {"down_block_types": ("DownEncoderBlock2D",) * 2, "up_block_types": ("UpDecoderBlock2D",) * 2}
            make_model = diffusers.AutoencoderKL if kind == "vae" else diffusers.VQModel
            return make_model(in_channels=3, out_channels=3, latent_channels=4, **blocks, **small), \
                (_randn(g, 1, 3, 32, 32),), {}
        if kind == "vae_tiny":
            model = diffusers.AutoencoderTiny(encoder_block_out_channels=(16, 16), decoder_block_out_channels=(16, 16),
                                              num_encoder_blocks=(1, 1), num_decoder_blocks=(1, 1), latent_channels=4)
            return model, (_randn(g, 1, 3, 32, 32),), {}
        if kind == "resnet_block":
            return ResnetBlock2D(in_channels=32, out_channels=64, temb_channels=64, groups=8), \
                (_randn(g, 1, 32, 16, 16), _randn(g, 1, 64)), {}
        if kind == "transformer2d":
            model = diffusers.Transformer2DModel(num_attention_heads=2, attention_head_dim=16, in_channels=32,
                                                 num_layers=1, cross_attention_dim=32, norm_num_groups=8)
            return model, (_randn(g, 1, 32, 8, 8),), {"encoder_hidden_states": context}
        if kind == "dit":
            model = diffusers.DiTTransformer2DModel(num_attention_heads=2, attention_head_dim=16, in_channels=4,
                                                    num_layers=2, sample_size=8, patch_size=2, num_embeds_ada_norm=10)
            return model, (_randn(g, 1, 4, 8, 8),), {"timestep": t, "class_labels": torch.tensor([3])}
        raise ValueError(f"unknown diffusers model {kind!r}")
    return make


def _hf(spec):
    return lambda: zoo_transformers.build(spec)


def _catalogue():
    entries = {}
    for name in TIMM_CNNS + TIMM_SIZED:
        entries[f"timm_{name}"] = Entry("timm", _timm_family(name), _timm(name, name in TIMM_SIZED),
                                        f"timm.create_model({name!r})")
    for name in TORCHVISION:
        family = "vit" if name.startswith("swin") else "cnn"
        entries[f"tv_{name}"] = Entry("torchvision", family, _torchvision(name), f"torchvision.models.{name}")
    for name, spec in zoo_transformers.SPECS.items():
        entries[name] = Entry("transformers", spec.family, _hf(spec), f"transformers {spec.model_type} ({spec.family})")
    for kind, description in (("unet2d", "UNet2DModel with attention blocks"),
                              ("unet2d_condition", "UNet2DConditionModel with cross-attention"),
                              ("vae", "AutoencoderKL (encode + decode)"), ("vq", "VQModel"),
                              ("vae_tiny", "AutoencoderTiny"), ("resnet_block", "ResnetBlock2D with a time embedding"),
                              ("transformer2d", "Transformer2DModel (spatial transformer, cross-attention)"),
                              ("dit", "DiTTransformer2DModel")):
        entries[f"diffusers_{kind}"] = Entry("diffusers", "diffusion", _diffusers(kind), f"diffusers {description}")
    return entries


MODELS = _catalogue()


def build(name):
    """The zoo model `name`, its inputs and description (see the module docstring)."""
    import torch
    if name not in MODELS:
        raise ValueError(f"unknown zoo model {name!r}")
    entry = MODELS[name]
    torch.manual_seed(SEED)
    model, args, kwargs = entry.make()
    return Workload(model.eval(), args, kwargs, entry.description)
