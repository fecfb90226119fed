"""Helpers by topic: seeding, model surgery."""

from composer.utils.module_surgery import update_optimizer_params
from composer.utils.seeding import configure_deterministic_mode, new_seed, seed_all

__all__ = ["configure_deterministic_mode", "new_seed", "seed_all", "update_optimizer_params"]
