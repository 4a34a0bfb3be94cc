"""Shared fixtures and Hypothesis profiles (``deadline=None``: first calls JIT-compile)."""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", deadline=None, max_examples=25,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile(
    "thorough", deadline=None, max_examples=300,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(scope="session")
def rgb224():
    """Two real RGB images (immunohistochemistry, fundus) at 224 x 224."""
    from medmnistc_fast.sample import sample_images

    return sample_images(2, 224, rgb=True)


@pytest.fixture(scope="session")
def gray224():
    """Two real gray images (CT, MR) at 224 x 224."""
    from medmnistc_fast.sample import sample_images

    return sample_images(2, 224, rgb=False)


@pytest.fixture
def rng():
    return np.random.default_rng(12345)
