"""Pretrains XLNet on data prepared by data_prep/create_tfrecords.py.

    python experiments/run_pretrain.py --data_dir=data/pretrain --model_dir=runs/base \
        --model_config=base --train_batch_size=256 --train_steps=100000

A run whose --model_dir already holds checkpoints resumes from the newest readable one
(weights, optimizer, step, Transformer-XL memory and data position). All logic lives in
xlnet_tf2.training; this file only parses flags.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app, flags  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("tpu", None, "Name or grpc:// address of the Cloud TPU to train on ('local' "
                    "on a TPU VM); the run resolves it, connects, initializes the TPU system and "
                    "uses TPUStrategy, and fails within --tpu_timeout seconds if nothing answers.")
flags.DEFINE_enum("strategy", "auto", ["auto", "tpu", "multi_worker", "mirrored", "one_device"],
                  "The tf.distribute strategy: 'auto' picks tpu when --tpu is given, multi_worker "
                  "when TF_CONFIG lists several workers, mirrored with several GPUs and "
                  "one_device otherwise.")
flags.DEFINE_integer("tpu_timeout", 60, "Seconds to wait for the TPU named by --tpu before "
                     "giving up with an error.")
flags.DEFINE_string("model_config", "base", "The model architecture: a preset name (base, large, "
                    "tiny), whose vocabulary size is taken from the data, or the path of an "
                    "xlnet_config.json file, whose n_token must match the data.")
flags.DEFINE_list("data_dir", None, "One or more comma-separated directories written by "
                  "data_prep/create_tfrecords.py (local paths or gs://); their record_info.json "
                  "manifests fix seq_len, reuse_len, num_predict, bi_data and the vocabulary.")
flags.DEFINE_string("model_dir", None, "Directory for checkpoints, TensorBoard logs and the "
                    "model config; if it already holds checkpoints the run resumes from them.")
flags.DEFINE_integer("train_batch_size", 8192, "Global batch size, summed over all replicas "
                     "(the paper uses 8192); it must divide evenly over the replicas, into even "
                     "halves with bi_data.")
flags.DEFINE_integer("train_steps", 500000, "Total number of optimizer steps of the run, counted "
                     "from the start of training (not from the resume point).")
flags.DEFINE_integer("steps_per_loop", 1000, "Number of training steps run inside one "
                     "tf.function call between returns to Python; larger values cut host "
                     "overhead, especially on TPU.")
flags.DEFINE_float("learning_rate", 4e-4, "Peak learning rate, reached at the end of warmup and "
                   "then decayed linearly to zero at --train_steps (the paper uses 4e-4).")
flags.DEFINE_integer("warmup_steps", 40000, "Number of steps of linear learning-rate warmup from "
                     "zero (the paper uses 40000).")
flags.DEFINE_float("weight_decay", 0.01, "Decoupled weight decay rate; LayerNorm parameters and "
                   "dense and output biases are exempt (the paper uses 0.01).")
flags.DEFINE_float("adam_epsilon", 1e-6, "Epsilon added to the square root of Adam's second "
                   "moment (the paper uses 1e-6).")
flags.DEFINE_bool("adam_bias_correction", False, "Use Adam's bias correction; off by default "
                  "to match the original XLNet optimizer, which has none.")
flags.DEFINE_float("clip_norm", 1.0, "Clip the gradient, summed over all replicas, to this "
                   "global norm (the original uses 1.0).")
flags.DEFINE_integer("mem_len", 384, "Number of Transformer-XL memory positions per layer "
                     "carried from one step of a stream to the next (the paper uses 384 with "
                     "seq_len 512); 0 disables memory.")
flags.DEFINE_enum("precision", "float32", ["float32", "mixed_bfloat16", "mixed_float16"],
                  "Numeric precision: float32, mixed_bfloat16 (TPU, recent GPUs), or "
                  "mixed_float16 with dynamic loss scaling (older GPUs).")
flags.DEFINE_bool("jit_compile", False, "Compile the forward and backward pass of each step with "
                  "XLA (on TPU everything is compiled regardless).")
flags.DEFINE_integer("save_steps", 10000, "Save a checkpoint (weights, optimizer, step, memory, "
                     "data position) every this many steps, and always at the end.")
flags.DEFINE_integer("keep_checkpoints", 5, "Number of most recent checkpoints to keep in "
                     "--model_dir.")
flags.DEFINE_integer("log_steps", 100, "Write TensorBoard scalars and a console line (loss, "
                     "learning rate, gradient norm, tokens/s, step time, MFU, ETA) every this "
                     "many steps.")
flags.DEFINE_string("init_checkpoint", None, "Checkpoint (prefix or directory) to initialize "
                    "the model weights from when --model_dir holds no checkpoint yet, e.g. a "
                    "converted release; its optimizer state is ignored.")
flags.DEFINE_integer("seed", 0, "Seed of the weight initialization, dropout and online "
                     "permutations; the same seed, data and flags give the same run.")
flags.DEFINE_float("dropout", None, "Override the model config's dropout rate (embeddings, "
                   "attention output, feed-forward); unset keeps the config's value.")
flags.DEFINE_float("dropatt", None, "Override the model config's attention-probability dropout "
                   "rate; unset keeps the config's value.")
flags.DEFINE_float("peak_tflops", None, "Peak TFLOP/s of one device for the MFU figure; unset "
                   "uses the data sheet of known GPUs/TPUs, or a measured matmul peak on CPU.")
flags.DEFINE_bool("record_steps", False, "Append every step's loss and the ids (stream, chunk, "
                  "direction, pass) of the examples it consumed to model_dir/steps.jsonl, to "
                  "audit exactly what was trained on.")
flags.mark_flags_as_required(["data_dir", "model_dir"])


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    from xlnet_tf2.training import distribution
    from xlnet_tf2.training.pretrain_job import run_pretraining
    from xlnet_tf2.training.trainer import DataExhaustedError, TrainingDivergedError
    from xlnet_tf2.training.run_config import PretrainConfig, RunConfigError
    from xlnet_tf2.config import ConfigError
    from xlnet_tf2.data.manifest import ManifestError
    from xlnet_tf2.data.pretrain_dataset import BatchLayoutError

    try:
        # First: multi-worker and TPU strategies need a fresh TensorFlow runtime.
        strategy = distribution.resolve_strategy(FLAGS.strategy, FLAGS.tpu, FLAGS.tpu_timeout)
        config = PretrainConfig(
            model_dir=FLAGS.model_dir, data_dirs=tuple(FLAGS.data_dir),
            model_config=FLAGS.model_config, train_batch_size=FLAGS.train_batch_size,
            train_steps=FLAGS.train_steps, steps_per_loop=FLAGS.steps_per_loop,
            learning_rate=FLAGS.learning_rate, warmup_steps=FLAGS.warmup_steps,
            weight_decay=FLAGS.weight_decay, adam_epsilon=FLAGS.adam_epsilon,
            adam_bias_correction=FLAGS.adam_bias_correction, clip_norm=FLAGS.clip_norm,
            mem_len=FLAGS.mem_len, precision=FLAGS.precision, jit_compile=FLAGS.jit_compile,
            save_steps=FLAGS.save_steps, keep_checkpoints=FLAGS.keep_checkpoints,
            log_steps=FLAGS.log_steps, init_checkpoint=FLAGS.init_checkpoint, seed=FLAGS.seed,
            dropout=FLAGS.dropout, dropatt=FLAGS.dropatt, peak_tflops=FLAGS.peak_tflops,
            record_steps=FLAGS.record_steps)
        result = run_pretraining(config, strategy)
    except (distribution.StrategyError, RunConfigError, ConfigError, ManifestError,
            BatchLayoutError, FileNotFoundError) as e:
        print(f"run_pretrain.py: error: {e}", file=sys.stderr)
        return 2
    except (TrainingDivergedError, DataExhaustedError) as e:
        print(f"run_pretrain.py: stopped: {e}", file=sys.stderr)
        return 3
    last = result.steps[-1]["loss"] if result.steps else float("nan")
    print(f"Finished at step {result.final_step} (started at {result.start_step}); "
          f"last loss {last:.4f}; model_dir {FLAGS.model_dir}", flush=True)
    return 0


if __name__ == "__main__":
    app.run(main)
