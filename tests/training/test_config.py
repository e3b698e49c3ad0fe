"""train-head's settings: a value no run can use is refused by its flag before anything is loaded."""

import argparse

import pytest

from nestling.daemon.cli.train_head import _boolean
from nestling.daemon.training.config import DataConfig, TrainConfig, check_settings


def test_the_defaults_and_a_distillation_only_run_pass():
    check_settings(DataConfig(), TrainConfig())
    check_settings(DataConfig(data_time_limit_s=60, cache_dir="cache"), TrainConfig(max_steps=0))


@pytest.mark.parametrize("data,train,message", [
    ({"samples_per_file": 0}, {}, "--samples-per-file must be at least 1, not 0"),
    ({"gen_batch": 0}, {}, "--gen-batch must be at least 1"),
    ({}, {"eval_every": 0}, "--eval-every must be at least 1"),
    ({}, {"unroll": 0}, "--unroll must be at least 1"),
    ({}, {"eval_steps": 0}, "--eval-steps must be at least 1"),
    ({"suffix_tokens": -1}, {}, "--suffix-tokens must not be negative"),
    ({"held_out_fraction": 0.0}, {}, "--held-out-fraction must be between 0 and 1"),
    ({"body_fraction": 1.5}, {}, "--body-fraction must be between 0 and 1, not 1.5"),
    ({}, {"lr": 0.0}, "--lr and --clip must be positive"),
    ({"cache_limit_gb": 0.0}, {}, "--cache-limit-gb must be positive"),
    ({}, {"time_limit_s": -5.0}, "--time-limit-s must be positive"),
    ({}, {"noise": float("nan")}, "--noise must be a finite number, not negative, not nan"),
    ({}, {"noise": -0.1}, "--noise must be a finite number, not negative, not -0.1"),
    ({}, {"step_decay": float("inf")}, "--step-decay must be a finite number, not negative, not inf"),
    ({}, {"reg_weight": -1.0}, "--reg-weight must be a finite number"),
    ({}, {"cls_weight": float("nan")}, "--cls-weight must be a finite number"),
    ({}, {"prompt_weight": -0.5}, "--prompt-weight must be a finite number"),
    ({}, {"lr": float("inf")}, "--lr must be a finite number"),
    ({}, {"clip": float("inf")}, "--clip must be a finite number"),
    ({}, {"cls_weight": 0.0, "reg_weight": 0.0}, "no loss to train on"),
    ({}, {"max_steps": 0}, "--max-steps 0 distils only and trains nothing: give --cache-dir DIR"),
    # (every held-out agreement read 0.0: no continuation had 6 tokens to score)
    ({"max_new_tokens": 4}, {"eval_steps": 6}, "give --max-new-tokens at least 6 or --eval-steps at most 4"),
])
def test_a_setting_no_run_can_use_names_its_flag(data, train, message):
    with pytest.raises(ValueError, match=message):
        check_settings(DataConfig(**data), TrainConfig(**train))


def test_a_boolean_flag_takes_true_or_false_and_nothing_else():
    assert _boolean("Yes") is True and _boolean("off") is False and _boolean("0") is False
    with pytest.raises(argparse.ArgumentTypeError, match="expected true or false, not 'y'"):
        _boolean("y")
