"""The speed-up methods as plain functions, for use in any PyTorch training loop."""

from composer.algorithms.alibi import apply_alibi
from composer.algorithms.augmix import augment_and_mix, augmix_image
from composer.algorithms.blurpool import apply_blurpool, blur_2d
from composer.algorithms.channels_last import apply_channels_last
from composer.algorithms.colout import colout
from composer.algorithms.cutmix import cutmix_batch, cutmix_inputs, gen_cutmix_bbox
from composer.algorithms.cutout import cutout
from composer.algorithms.ema import compute_ema
from composer.algorithms.factorize import apply_factorization
from composer.algorithms.gated_linear_units import apply_gated_linear_units
from composer.algorithms.ghost_batchnorm import apply_ghost_batchnorm
from composer.algorithms.gradient_clipping import apply_gradient_clipping
from composer.algorithms.gyro_dropout import apply_gyro_dropout
from composer.algorithms.label_smoothing import smooth_labels
from composer.algorithms.layer_freezing import freeze_layers
from composer.algorithms.low_precision_groupnorm import apply_low_precision_groupnorm
from composer.algorithms.low_precision_layernorm import apply_low_precision_layernorm
from composer.algorithms.mixup import gen_interpolation_lambda, mix_targets, mixup_batch, mixup_inputs
from composer.algorithms.no_op_model import no_op_model
from composer.algorithms.progressive_resizing import resize_inputs
from composer.algorithms.randaugment import randaugment, randaugment_image
from composer.algorithms.sam import SAMOptimizer, sam_perturbation
from composer.algorithms.scale_schedule import scale_scheduler
from composer.algorithms.selective_backprop import select_using_loss, should_selective_backprop
from composer.algorithms.seq_length_warmup import apply_seq_length_warmup, set_batch_sequence_length
from composer.algorithms.squeeze_excite import apply_se
from composer.algorithms.stochastic_depth import apply_stochastic_depth
from composer.algorithms.swa import swa_annealed_lr, update_bn_statistics, update_swa_weights
from composer.algorithms.weight_standardization import apply_weight_standardization

__all__: list[str] = [
    "SAMOptimizer",
    "apply_alibi",
    "apply_blurpool",
    "apply_channels_last",
    "apply_factorization",
    "apply_gated_linear_units",
    "apply_ghost_batchnorm",
    "apply_gradient_clipping",
    "apply_gyro_dropout",
    "apply_low_precision_groupnorm",
    "apply_low_precision_layernorm",
    "apply_se",
    "apply_seq_length_warmup",
    "apply_stochastic_depth",
    "apply_weight_standardization",
    "augment_and_mix",
    "augmix_image",
    "blur_2d",
    "colout",
    "compute_ema",
    "cutmix_batch",
    "cutmix_inputs",
    "cutout",
    "freeze_layers",
    "gen_cutmix_bbox",
    "gen_interpolation_lambda",
    "mix_targets",
    "mixup_batch",
    "mixup_inputs",
    "no_op_model",
    "randaugment",
    "randaugment_image",
    "resize_inputs",
    "sam_perturbation",
    "scale_scheduler",
    "select_using_loss",
    "set_batch_sequence_length",
    "should_selective_backprop",
    "smooth_labels",
    "swa_annealed_lr",
    "update_bn_statistics",
    "update_swa_weights",
]
