"""The faithfulness tolerances of design.md section 3, as data: the one table that
tests/test_golden.py and benchmarks/check_faithfulness.py hold our outputs to against the
reference's (medmnistc 0.1.0) at 224 px.

Units: gray levels of uint8 samples (absolute difference, per sample).
"""

#: Largest allowed absolute difference per deterministic corruption: 0 (bit-exact) where the
#: reference uses Pillow (pixelate, JPEG, brightness, contrast, gamma) and for black_corner;
#: 1 for defocus, Gaussian and zoom blur and saturate; motion blur (at the recorded angle) 2,
#: with :data:`MOTION_WITHIN1` below.
MAX_ABS = {**dict.fromkeys(("pixelate", "jpeg_compression", "brightness_up", "brightness_down",
                            "contrast_up", "contrast_down", "gamma_corr_up", "gamma_corr_down",
                            "black_corner"), 0),
           **dict.fromkeys(("defocus_blur", "gaussian_blur", "zoom_blur", "saturate"), 1),
           "motion_blur": 2}

#: motion_blur at the recorded angle: smallest allowed fraction of samples within 1 level, per
#: image and angle.
MOTION_WITHIN1 = 0.99

#: The random corruptions, held to the reference in distribution (tests/test_golden.py), not
#: sample by sample.
RANDOM = ("gaussian_noise", "speckle_noise", "impulse_noise", "shot_noise", "stain_deposit",
          "bubble", "characters")


def manifest_form() -> dict:
    """The table as tools/make_golden.py records it in tests/golden/MANIFEST.json
    (``tolerances_intended``)."""
    return {
        "bit_exact": [c for c, m in MAX_ABS.items() if m == 0],
        "max_abs_1": [c for c, m in MAX_ABS.items() if m == 1],
        "motion_blur": (f"same angle: |diff| <= 1 on >= {MOTION_WITHIN1:.0%} of pixels, "
                        f"<= {MAX_ABS['motion_blur']} everywhere"),
        "distribution": list(RANDOM),
        "source": "/work/shared/design.md section 3",
    }
