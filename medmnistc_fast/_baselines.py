"""MedMNIST-C evaluation data: AlexNet baseline errors and the datasets' task types.

Plain data, no logic (see ``medmnistc_fast.evaluate`` for the metrics that use it).

The AlexNet numbers are the balanced errors (1 - balanced accuracy) of the AlexNet models of the
MedMNIST-C benchmark, as distributed with the reference implementation:

    medmnistc 0.1.0, ``medmnistc/utils/baselines.py`` (``BASELINES``), Apache License 2.0,
    https://github.com/francescodisalvo05/medmnistc-api
    F. Di Salvo, S. Doerrich, C. Ledig, "MedMNIST-C: Comprehensive benchmark and improved classifier
    robustness by simulating realistic image corruptions", arXiv:2406.17536, 2024.

The values are reproduced unchanged (bit for bit as Python floats). In the reference, ``clean_score`` is the
clean *error* (not an accuracy) and ``raw_scores[c]`` is the error on corruption ``c`` already averaged over
the five severities; here they are called ``clean_error`` and ``errors[c]``. The order of ``errors`` is the
reference's order of the dataset's corruptions.

The task strings and class counts are those of MedMNIST's ``INFO`` table (medmnist v3).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

from . import registry

__all__ = [
    "ALEXNET_BASELINES",
    "DATASET_CORRUPTIONS",
    "DATASET_N_CLASSES",
    "DATASET_TASKS",
    "TASKS",
]

#: The four MedMNIST task strings handled by ``medmnistc_fast.evaluate``: the values of
#: ``medmnist.INFO[flag]["task"]`` (medmnist 3.0) over the 12 datasets, :data:`DATASET_TASKS`.
TASKS: tuple[str, ...] = (
    "binary-class",
    "multi-class",
    "ordinal-regression",
    "multi-label, binary-class",
)

#: MedMNIST ``INFO[flag]["task"]`` for the 12 MedMNIST-C datasets (from the registry).
DATASET_TASKS: Mapping[str, str] = registry.TASKS  # read-only

#: Number of classes (labels, for chestmnist) of each dataset (from the registry).
DATASET_N_CLASSES: Mapping[str, int] = registry.N_CLASSES  # read-only


def _entry(clean_error: float, errors: dict) -> Mapping:
    return MappingProxyType({"clean_error": clean_error, "errors": MappingProxyType(errors)})


#: ``ALEXNET_BASELINES[dataset] = {"clean_error": E_clean, "errors": {corruption: E_c}}`` (read-only).
#: Source: medmnistc 0.1.0 ``medmnistc/utils/baselines.py`` (Apache-2.0), see the module docstring.
ALEXNET_BASELINES: Mapping[str, Mapping] = MappingProxyType(
    {
    "pathmnist": _entry(
        clean_error=0.08839299601334816,
        errors={
            "pixelate": 0.20934201922262957,
            "jpeg_compression": 0.24709267033930377,
            "defocus_blur": 0.4621259742146214,
            "motion_blur": 0.3689076534699618,
            "brightness_up": 0.41551581022730166,
            "brightness_down": 0.2811688318161528,
            "contrast_up": 0.2338925659881773,
            "contrast_down": 0.13718687818913905,
            "saturate": 0.3341143518079194,
            "stain_deposit": 0.24930831751137275,
            "bubble": 0.10818301335634566,
        },
    ),
    "chestmnist": _entry(
        clean_error=0.2839064387513035,
        errors={
            "pixelate": 0.44895070087295996,
            "jpeg_compression": 0.34575690815860566,
            "gaussian_noise": 0.47688317292098203,
            "speckle_noise": 0.45687894795025785,
            "impulse_noise": 0.48553631547337917,
            "shot_noise": 0.4926966815396587,
            "gaussian_blur": 0.3176801263607164,
            "brightness_up": 0.2993721457134663,
            "brightness_down": 0.29711530406534037,
            "contrast_up": 0.28751004051276824,
            "contrast_down": 0.2954742427570406,
            "gamma_corr_up": 0.287462117104012,
            "gamma_corr_down": 0.2891642074561852,
        },
    ),
    "dermamnist": _entry(
        clean_error=0.3985775597242611,
        errors={
            "pixelate": 0.5105118313063095,
            "jpeg_compression": 0.47716296678659287,
            "gaussian_noise": 0.770161396521756,
            "speckle_noise": 0.7688784860204994,
            "impulse_noise": 0.7995552265467947,
            "shot_noise": 0.8391552104792783,
            "defocus_blur": 0.7008318467374395,
            "motion_blur": 0.6266414682428412,
            "zoom_blur": 0.5277668583085878,
            "brightness_up": 0.4473990148869178,
            "brightness_down": 0.5772968080812169,
            "contrast_up": 0.430415384126964,
            "contrast_down": 0.5398210493891896,
            "black_corner": 0.7591457853547467,
            "characters": 0.4461917314736283,
        },
    ),
    "octmnist": _entry(
        clean_error=0.20199999999999996,
        errors={
            "pixelate": 0.3124,
            "jpeg_compression": 0.29640000000000005,
            "speckle_noise": 0.386,
            "defocus_blur": 0.3084,
            "motion_blur": 0.4892,
            "contrast_down": 0.4196,
        },
    ),
    "pneumoniamnist": _entry(
        clean_error=0.10085470085470083,
        errors={
            "pixelate": 0.22102564102564104,
            "jpeg_compression": 0.2798290598290598,
            "gaussian_noise": 0.4414529914529915,
            "speckle_noise": 0.3457264957264957,
            "impulse_noise": 0.4581196581196581,
            "shot_noise": 0.4106837606837607,
            "gaussian_blur": 0.2730769230769231,
            "brightness_up": 0.14649572649572645,
            "brightness_down": 0.2782051282051282,
            "contrast_up": 0.09529914529914527,
            "contrast_down": 0.23743589743589744,
            "gamma_corr_up": 0.09606837606837607,
            "gamma_corr_down": 0.16641025641025642,
        },
    ),
    "retinamnist": _entry(
        clean_error=0.5582064849927977,
        errors={
            "pixelate": 0.6017003263074344,
            "jpeg_compression": 0.6795223564688244,
            "gaussian_noise": 0.7040832524914012,
            "speckle_noise": 0.6135258841167651,
            "defocus_blur": 0.6882905018079196,
            "motion_blur": 0.7075760943057883,
            "brightness_down": 0.5844791133844842,
            "contrast_down": 0.6092882382338243,
        },
    ),
    "breastmnist": _entry(
        clean_error=0.14536340852130336,
        errors={
            "pixelate": 0.46127819548872184,
            "jpeg_compression": 0.2986215538847118,
            "speckle_noise": 0.38709273182957393,
            "motion_blur": 0.25902255639097743,
            "brightness_up": 0.3197994987468672,
            "brightness_down": 0.21127819548872181,
            "contrast_down": 0.15864661654135334,
        },
    ),
    "bloodmnist": _entry(
        clean_error=0.018369282094266692,
        errors={
            "pixelate": 0.05975618949678589,
            "jpeg_compression": 0.13976187053705183,
            "defocus_blur": 0.22399795597780647,
            "motion_blur": 0.1845192137218041,
            "brightness_up": 0.06946294328845175,
            "brightness_down": 0.0790077546902872,
            "contrast_up": 0.05215362284240639,
            "contrast_down": 0.07966068499560328,
            "saturate": 0.03478558170020538,
            "stain_deposit": 0.18536119379858546,
            "bubble": 0.12898833684644578,
        },
    ),
    "tissuemnist": _entry(
        clean_error=0.3917787199385978,
        errors={
            "pixelate": 0.49272908707597907,
            "jpeg_compression": 0.508070087070269,
            "impulse_noise": 0.7970869222746931,
            "gaussian_blur": 0.4805143361974326,
            "brightness_up": 0.4618274173802247,
            "brightness_down": 0.51981943234386,
            "contrast_up": 0.5026233641102424,
            "contrast_down": 0.5369342652194591,
        },
    ),
    "organamnist": _entry(
        clean_error=0.050053710403475504,
        errors={
            "pixelate": 0.07589728744538755,
            "jpeg_compression": 0.10233182799848468,
            "gaussian_noise": 0.558867512509986,
            "speckle_noise": 0.5008977196696448,
            "impulse_noise": 0.6005122792556206,
            "shot_noise": 0.5704549211261293,
            "gaussian_blur": 0.23340661727240267,
            "brightness_up": 0.14763547790322412,
            "brightness_down": 0.2646445055204496,
            "contrast_up": 0.10977873034814234,
            "contrast_down": 0.1268424696095805,
            "gamma_corr_up": 0.10360009998047674,
            "gamma_corr_down": 0.10577092296366888,
        },
    ),
    "organcmnist": _entry(
        clean_error=0.07596783210891289,
        errors={
            "pixelate": 0.12161270665759313,
            "jpeg_compression": 0.10754481922990186,
            "gaussian_noise": 0.5736544084235357,
            "speckle_noise": 0.5130960298987614,
            "impulse_noise": 0.5997780092763433,
            "shot_noise": 0.5492477253691926,
            "gaussian_blur": 0.316895537101905,
            "brightness_up": 0.16011849294420644,
            "brightness_down": 0.2324271692594097,
            "contrast_up": 0.09991836613387597,
            "contrast_down": 0.15327395964015147,
            "gamma_corr_up": 0.1426418229218433,
            "gamma_corr_down": 0.12390902424472901,
        },
    ),
    "organsmnist": _entry(
        clean_error=0.24300485476777922,
        errors={
            "pixelate": 0.31259415418134306,
            "jpeg_compression": 0.26996994867350865,
            "gaussian_noise": 0.5889124203738291,
            "speckle_noise": 0.5450100158501043,
            "impulse_noise": 0.6010108858901404,
            "shot_noise": 0.5519125643755777,
            "gaussian_blur": 0.4466645657200248,
            "brightness_up": 0.3598501969979232,
            "brightness_down": 0.3592866403894267,
            "contrast_up": 0.2871702451645464,
            "contrast_down": 0.3128243336438499,
            "gamma_corr_up": 0.30253196514691594,
            "gamma_corr_down": 0.3116016263827458,
        },
    ),
    }
)

#: The corruptions of each dataset, in the reference's order (equal to the keys of its AlexNet
#: baseline; tests/test_evaluate.py checks it).
DATASET_CORRUPTIONS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {name: tuple(registry.TABLES[name]) for name in registry.DATASETS}
)
