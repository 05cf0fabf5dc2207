"""Tiny multimodal transformers models around tilegraph's decoders, for the loading tests."""

import inspect

import torch

from tilegraph.models.hf_presets import hf_config

# Multimodal wrappers of a supported decoder: their type -> transformers' name for their
# classes, the tiny decoder, a one-layer vision tower of their own kind
WRAPPED = {"gemma3": ("Gemma3", "tiny-gemma3", dict(model_type="siglip_vision_model")),
           "mistral3": ("Mistral3", "tiny-mistral", dict(model_type="pixtral", head_dim=8)),
           "llava": ("Llava", "tiny-llama3", dict(model_type="clip_vision_model",
                                                   projection_dim=16)),
           "llava_next": ("LlavaNext", "tiny-mistral", dict(model_type="clip_vision_model",
                                                            projection_dim=16)),
           "llava_onevision": ("LlavaOnevision", "tiny-qwen2",
                               dict(model_type="siglip_vision_model")),
           "internvl": ("InternVL", "tiny-qwen3", dict(model_type="internvl_vision")),
           "idefics3": ("Idefics3", "tiny-llama3", dict(model_type="idefics3_vision")),
           "smolvlm": ("SmolVLM", "tiny-llama3", dict(model_type="smolvlm_vision")),
           "qwen2_5_vl": ("Qwen2_5_VL", "tiny-qwen2",
                          dict(depth=1, num_heads=2, out_hidden_size=32, window_size=28,
                               fullatt_block_indexes=[0])),
           "qwen3_vl": ("Qwen3VL", "tiny-qwen3",
                        dict(depth=1, num_heads=2, out_hidden_size=32, patch_size=14,
                             num_position_embeddings=4, deepstack_visual_indexes=[0])),
           "exaone4_5": ("Exaone4_5_", "tiny-exaone4",
                         dict(num_key_value_heads=2, out_hidden_size=32, window_size=28,
                              fullatt_block_indexes=[0])),
           "aya_vision": ("AyaVision", "tiny-cohere2", dict(model_type="siglip_vision_model")),
           "got_ocr2": ("GotOcr2", "tiny-qwen2", dict()),
           "vipllava": ("VipLlava", "tiny-llama3", dict(model_type="clip_vision_model",
                                                        projection_dim=16)),
           "video_llava": ("VideoLlava", "tiny-llama3", dict(model_type="clip_vision_model",
                                                             projection_dim=16)),
           "llava_next_video": ("LlavaNextVideo", "tiny-mistral",
                                dict(model_type="clip_vision_model", projection_dim=16)),
           # (Fuyu's image side is one linear map of the patches: no vision config)
           "fuyu": ("Fuyu", "tiny-persimmon", None)}
# The decoder's config where the wrapper names it its own way: Qwen2.5-VL's (its rotary
# embedding by three position sections)
TEXT_CHANGES = {"qwen2_5_vl": dict(model_type="qwen2_5_vl_text",
                                   rope_scaling={"type": "mrope", "mrope_section": [1, 1, 2]}),
                "qwen3_vl": dict(model_type="qwen3_vl_text",
                                 rope_parameters={"rope_type": "default", "rope_theta": 1e6,
                                                  "mrope_section": [2, 2, 2],
                                                  "mrope_interleaved": True})}


def tiny_with_images(wrapper: str):
    """A multimodal model (a one-layer vision tower beside a tiny decoder) with random
    weights, every norm and bias away from its initial value."""
    import transformers

    kind, text, vision = WRAPPED[wrapper]
    text_config = {**hf_config(text).to_dict(), **TEXT_CHANGES.get(wrapper, {})}
    # (Fuyu's model with its LM head is a causal LM's class)
    model_class = (getattr(transformers, kind + "ForConditionalGeneration", None)
                   or getattr(transformers, kind + "ForCausalLM"))
    if "logit_scale" in text_config and not _scales_logits(model_class):
        # (transformers 5.17's Aya Vision drops Cohere's logit_scale, 5.25's applies it as
        # tilegraph does: a scale of 1 lets either version check the rest)
        text_config["logit_scale"] = 1.0
    if vision is None:
        image_side = dict(image_size=28, patch_size=14, image_token_id=66)
    else:
        image_side = dict(vision_config=dict(vision, hidden_size=16, intermediate_size=32,
                                             num_hidden_layers=1, num_attention_heads=2,
                                             image_size=28, patch_size=14),
                          image_token_index=66)
    tokens = (dict(mm_tokens_per_image=4, boi_token_index=64, eoi_token_index=65)
              if wrapper == "gemma3" else {})
    config = getattr(transformers, kind + "Config")(text_config=text_config, **image_side,
                                                    **tokens)
    torch.manual_seed(0)
    hf = model_class(config).eval()
    with torch.no_grad():
        for param in hf.parameters():
            if param.ndim == 2:
                param.mul_(5.0)
            else:
                param.add_(torch.randn_like(param), alpha=0.1)
    return hf


def _scales_logits(model_class) -> bool:
    """Whether this transformers' multimodal forward multiplies the logits by the decoder's
    logit_scale."""
    return "logit_scale" in inspect.getsource(model_class.forward)
