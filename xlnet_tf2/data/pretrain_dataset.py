"""The pretraining input pipeline: prepared directories -> per-replica batches of compact
features (ids, segments, ranks [L], target positions [P]; the dense masks are built in the
step). The schedule, the layout of rows over replicas and micro-batches, and the rule relating
streams and batch: docs/DATA.md#the-schedule-of-the-pretraining-pipeline.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Dict, List, Sequence, Tuple, Union

import tensorflow as tf

from xlnet_tf2.data import integrity
from xlnet_tf2.data import manifest as manifest_lib
from xlnet_tf2.data import records
from xlnet_tf2.data.batch_layout import BatchLayout, BatchLayoutError
from xlnet_tf2.data.objective_sampling import online_ranks

# Per example: (dtype, shape as a function of (L, P)). segment_ids fit int8 (0..4).
OUTPUT_DTYPES = {
    "input_ids": (tf.int32, lambda L, P: [L]),
    "segment_ids": (tf.int8, lambda L, P: [L]),
    "perm_rank": (tf.int32, lambda L, P: [L]),
    "target_positions": (tf.int32, lambda L, P: [P]),
    "stream_id": (tf.int32, lambda L, P: []),
    "chunk_index": (tf.int32, lambda L, P: []),
    "direction": (tf.int32, lambda L, P: []),
    "pass_id": (tf.int32, lambda L, P: []),
}
OUTPUT_FEATURES = tuple(OUTPUT_DTYPES)
# What the pipeline shipped while the host built the dense masks (for the comparison).
DENSE_HOST_DTYPES = {
    "input_ids": (tf.int32, lambda L, P: [L]),
    "segment_ids": (tf.int32, lambda L, P: [L]),
    "perm_mask": (tf.float32, lambda L, P: [L, L]),
    "target_mapping": (tf.float32, lambda L, P: [P, L]),
    "target": (tf.int32, lambda L, P: [P]),
    "target_mask": (tf.float32, lambda L, P: [P]),
    "stream_id": (tf.int32, lambda L, P: []),
    "chunk_index": (tf.int32, lambda L, P: []),
    "direction": (tf.int32, lambda L, P: []),
    "pass_id": (tf.int32, lambda L, P: []),
}


def feature_bytes(seq_len: int, num_predict: int, dense_masks: bool = False) -> Dict[str, int]:
    """Host-to-device bytes of each feature of one example: the compact features this pipeline
    ships, or (`dense_masks`) the features of the former host-built dense masks."""
    table = DENSE_HOST_DTYPES if dense_masks else OUTPUT_DTYPES
    sizes = {}
    for name, (dtype, shape) in table.items():
        count = 1
        for d in shape(seq_len, num_predict):
            count *= d
        sizes[name] = count * dtype.size
    return sizes


def bytes_per_example(seq_len: int, num_predict: int, dense_masks: bool = False) -> int:
    """Host-to-device bytes of one example (the sum of `feature_bytes`)."""
    return sum(feature_bytes(seq_len, num_predict, dense_masks).values())


@dataclasses.dataclass(frozen=True)
class DataShape:
    """The static example shape of prepared data (from its manifest): what the training step
    is compiled for."""

    seq_len: int
    reuse_len: int
    num_predict: int
    bi_data: bool


@dataclasses.dataclass(frozen=True)
class Block:
    data_dir: str
    dir_index: int
    pass_id: int
    group: int
    steps: int           # chunks per stream of this directory
    stream_offset: int   # added to stream ids so they are unique across directories


@dataclasses.dataclass(frozen=True)
class PretrainSchedule:
    """Which (directory, pass, stream group, chunk) every training step reads."""

    blocks: List[Block]
    streams_per_step: int
    manifests: List[dict]

    @property
    def steps_per_cycle(self) -> int:
        return sum(b.steps for b in self.blocks)

    def locate(self, step: int):
        """(block index, chunk) of a training step."""
        position = step % self.steps_per_cycle
        for index, block in enumerate(self.blocks):
            if position < block.steps:
                return index, position
            position -= block.steps
        raise AssertionError("unreachable")


@dataclasses.dataclass(frozen=True)
class PretrainData:
    """Prepared directories, each manifest read once: the one description of a run's data.

    `read` checks that the directories agree with each other (example shape, vocabulary,
    SentencePiece model); `check` that they match given training settings; `validate` that a
    batch layout can be served and every file it reads has its manifest's size, all without
    building a pipeline; `dataset` builds the tf.data pipeline.
    """

    data_dirs: Tuple[str, ...]
    manifests: Tuple[dict, ...]

    @classmethod
    def read(cls, data_dirs: Union[str, Sequence[str]]) -> "PretrainData":
        """Reads every manifest once. Raises ManifestError naming the directory that is
        missing, incomplete or disagrees with the first."""
        dirs = (data_dirs,) if isinstance(data_dirs, str) else tuple(data_dirs)
        if not dirs:
            raise manifest_lib.ManifestError("No data directory given.")
        manifests = tuple(manifest_lib.read_manifest(d) for d in dirs)
        data = cls(dirs, manifests)
        shape = data.shape
        for d, m in zip(dirs[1:], manifests[1:]):
            manifest_lib.check_manifest(m, data_dir=d, seq_len=shape.seq_len,
                                        reuse_len=shape.reuse_len,
                                        num_predict=shape.num_predict, bi_data=shape.bi_data,
                                        vocab_size=data.vocab_size)
            if m["spm_sha256"] != data.spm_sha256:
                raise manifest_lib.ManifestError(
                    f"{d} was encoded with another SentencePiece model than {dirs[0]}; all "
                    "directories of one training run must share the vocabulary.")
        return data

    @property
    def shape(self) -> DataShape:
        params = self.manifests[0]["params"]
        return DataShape(seq_len=params["seq_len"], reuse_len=params["reuse_len"],
                         num_predict=params["num_predict"], bi_data=bool(params["bi_data"]))

    @property
    def vocab_size(self) -> int:
        return int(self.manifests[0]["vocab_size"])

    @property
    def spm_sha256(self) -> str:
        return self.manifests[0]["spm_sha256"]

    @property
    def perm_size(self) -> int:
        return self.manifests[0]["params"]["perm_size"]

    def check(self, *, seq_len: int, reuse_len: int, num_predict: int, bi_data: bool,
              vocab_size: int) -> None:
        """Raises ManifestError if the data was prepared with other settings."""
        for d, m in zip(self.data_dirs, self.manifests):
            manifest_lib.check_manifest(m, data_dir=d, seq_len=seq_len, reuse_len=reuse_len,
                                        num_predict=num_predict, bi_data=bi_data,
                                        vocab_size=vocab_size)

    def schedule(self, global_batch_size: int) -> PretrainSchedule:
        """The step schedule at a global batch; BatchLayoutError if the prepared streams
        cannot serve it."""
        bi_data = self.shape.bi_data
        if global_batch_size <= 0 or (bi_data and global_batch_size % 2):
            raise BatchLayoutError(f"global_batch_size={global_batch_size} must be positive"
                                   f"{' and even with bi_data' if bi_data else ''}.")
        per_step = global_batch_size // 2 if bi_data else global_batch_size
        for d, m in zip(self.data_dirs, self.manifests):
            if m["num_streams"] % per_step:
                raise BatchLayoutError(
                    f"{d} has num_streams={m['num_streams']}, not a multiple of the {per_step} "
                    f"streams each step reads (global batch {global_batch_size}"
                    f"{', halved for bi_data' if bi_data else ''}). Re-prepare with "
                    f"--num_streams a multiple of {per_step}, or use a global batch whose "
                    f"{'half ' if bi_data else ''}divides {m['num_streams']}.")
        manifests = list(self.manifests)
        offsets = [sum(m["num_streams"] for m in manifests[:i]) for i in range(len(manifests))]
        blocks = []
        for pass_id in range(max(m["num_passes"] for m in manifests)):
            for i, (d, m) in enumerate(zip(self.data_dirs, manifests)):
                if pass_id >= m["num_passes"]:
                    continue
                for group in range(m["num_streams"] // per_step):
                    blocks.append(Block(d, i, pass_id, group, m["chunks_per_stream"],
                                        offsets[i]))
        return PretrainSchedule(blocks=blocks, streams_per_step=per_step, manifests=manifests)

    def _slots(self, schedule: PretrainSchedule, layout: BatchLayout, replicas: Sequence[int]):
        """([slot][block] file paths, [slot] (stream, direction)) of the rows of `replicas`."""
        slot_files, slot_streams = [], []
        for replica in replicas:
            for row in range(layout.replica_batch):
                stream, direction = layout.slot(replica, row)
                slot_files.append([os.path.join(b.data_dir, records.shard_name(
                    b.pass_id, direction, b.group * schedule.streams_per_step + stream))
                    for b in schedule.blocks])
                slot_streams.append((stream, direction))
        return slot_files, slot_streams

    def validate(self, layout: BatchLayout) -> None:
        """Checks, without building a pipeline, that `layout` can be served and that every
        file it reads has the size its manifest records (ManifestError / BatchLayoutError
        naming the directory, file or flag)."""
        schedule = self.schedule(layout.global_batch)
        slot_files, _ = self._slots(schedule, layout, range(layout.num_replicas))
        integrity.check_slot_files(schedule, slot_files)

    def corrupt_record_locator(self, global_batch_size: int) -> integrity.CorruptRecordLocator:
        """Finds the file and record behind a DataLossError of a training step."""
        return integrity.CorruptRecordLocator(self.schedule(global_batch_size),
                                              bi_data=self.shape.bi_data)

    def dataset(self, global_batch_size: int, *, input_context=None, start_step: int = 0,
                online_permutation: bool = False, seed: int = 0,
                micro_batches: int = 1) -> tf.data.Dataset:
        """Per-replica batches (see `build_pretrain_dataset`)."""
        shape = self.shape
        seq_len, num_predict, bi_data = shape.seq_len, shape.num_predict, shape.bi_data
        schedule = self.schedule(global_batch_size)
        layout, replicas = _pipeline_layout(global_batch_size, bi_data, input_context,
                                            micro_batches)
        local = layout.replica_batch
        first_block, skip = schedule.locate(start_step)
        perm_size = self.perm_size
        slot_files, slot_streams = self._slots(schedule, layout, replicas)
        slots = [_slot_dataset(files, first_block, skip) for files in slot_files]
        # File sizes against the manifest now; every record against the schedule while reading.
        integrity.check_slot_files(schedule, slot_files)
        check_records = integrity.RecordCheck(schedule, slot_files, slot_streams)
        block_dir = tf.constant([b.dir_index for b in schedule.blocks], tf.int32)
        block_offset = tf.constant([b.stream_offset for b in schedule.blocks], tf.int32)
        block_end = tf.constant([0] + [b.steps for b in schedule.blocks], tf.int64)
        block_end = tf.cumsum(block_end)[1:]
        cycle_steps = schedule.steps_per_cycle

        # Not converted by AutoGraph (nor what it calls): no Python control flow on tensors
        # here, and converting it and the record check cost 0.3 CPU-s per process start.
        @tf.autograph.experimental.do_not_convert
        def to_batch(step, *serialized):
            parsed = check_records(records.parse_batch(tf.stack(serialized), seq_len,
                                                       num_predict), step)
            position = step % cycle_steps
            block = tf.cast(tf.searchsorted(block_end, position[None], side="right")[0],
                            tf.int32)
            cycle = step // cycle_steps
            if online_permutation:
                keys = _row_keys(parsed, block_dir[block], cycle, seed)
                parsed["perm_rank"] = online_ranks(keys, seq_len, perm_size)
            features = dict(parsed)
            features["stream_id"] = parsed["stream_id"] + block_offset[block]
            # [k * B, ...] -> [k, B, ...]: one element per replica served by this pipeline.
            return {name: tf.reshape(tf.cast(features[name], OUTPUT_DTYPES[name][0]),
                                     [len(replicas), local] + features[name].shape[1:].as_list())
                    for name in OUTPUT_FEATURES}

        steps = tf.data.Dataset.counter(start=start_step, dtype=tf.int64)
        dataset = tf.data.Dataset.zip((steps,) + tuple(slots))
        dataset = dataset.map(to_batch, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        # Each step element holds k replicas' batches; emit them one after the other.
        dataset = dataset.flat_map(tf.data.Dataset.from_tensor_slices)
        options = tf.data.Options()
        options.deterministic = True
        options.experimental_distribute.auto_shard_policy = (
            tf.data.experimental.AutoShardPolicy.OFF)  # sharding is done by the schedule above
        return dataset.with_options(options).prefetch(tf.data.AUTOTUNE)


def load_schedule(data_dirs: Union[str, Sequence[str]], *, seq_len: int, reuse_len: int,
                  num_predict: int, bi_data: bool, vocab_size: int,
                  global_batch_size: int) -> PretrainSchedule:
    """Reads and checks every manifest and builds the step schedule.

    Raises:
      ManifestError if a directory is incomplete or does not match the training settings.
      BatchLayoutError if the global batch cannot be served from the prepared streams.
    """
    data = PretrainData.read(data_dirs)
    data.check(seq_len=seq_len, reuse_len=reuse_len, num_predict=num_predict, bi_data=bi_data,
               vocab_size=vocab_size)
    return data.schedule(global_batch_size)


def _pipeline_layout(global_batch_size: int, bi_data: bool, input_context,
                     micro_batches: int = 1):
    """(BatchLayout of the run, replica ids served by this input pipeline)."""
    replicas = input_context.num_replicas_in_sync if input_context else 1
    pipelines = input_context.num_input_pipelines if input_context else 1
    pipeline_id = input_context.input_pipeline_id if input_context else 0
    layout = BatchLayout(global_batch_size, replicas, micro_batches, bi_data)
    if replicas % pipelines:
        raise BatchLayoutError(f"{replicas} replicas cannot be split evenly over "
                               f"{pipelines} input pipelines.")
    per_pipeline = replicas // pipelines
    return layout, list(range(pipeline_id * per_pipeline, (pipeline_id + 1) * per_pipeline))


def _slot_dataset(files: List[str], first_block: int, skip: int) -> tf.data.Dataset:
    # The first cycle starts mid-way (resume); later cycles start at block 0.
    head = tf.data.TFRecordDataset(files[first_block:]).skip(skip)
    return head.concatenate(tf.data.TFRecordDataset(files).repeat())


def _row_keys(parsed: dict, dir_index: tf.Tensor, cycle: tf.Tensor, seed: int) -> tf.Tensor:
    """string [B] naming each row's data identity, the cycle and the seed (online orders)."""
    parts = [tf.strings.as_string(parsed[name])
             for name in ("pass_id", "direction", "stream_id", "chunk_index")]
    prefix = tf.strings.format("{}:{}:{}", (seed, cycle, dir_index))
    return tf.strings.join([tf.fill(tf.shape(parts[0]), prefix)] + parts, separator=":")


def build_pretrain_dataset(data_dirs: Union[str, Sequence[str]], *, seq_len: int,
                           reuse_len: int, num_predict: int, bi_data: bool, vocab_size: int,
                           global_batch_size: int, input_context=None, start_step: int = 0,
                           online_permutation: bool = False, seed: int = 0,
                           micro_batches: int = 1) -> tf.data.Dataset:
    """Per-replica pretraining batches for `strategy.distribute_datasets_from_function`.

    Args:
      data_dirs: one or more directories written by data_prep/create_tfrecords.py.
      seq_len, reuse_len, num_predict, bi_data, vocab_size: the training configuration; each
        manifest must match it exactly.
      global_batch_size: G, summed over all replicas.
      input_context: a `tf.distribute.InputContext` (None: one replica, one pipeline).
      start_step: the first training step to produce (resume); nothing before it is read
        except at most chunks_per_stream - 1 records of one file per slot.
      online_permutation: re-sample the factorization order in the graph (stateless, from
        `seed`, the row's identity and the cycle) instead of using the stored one.
      seed: seed of the online permutation.
      micro_batches: --grad_accum_steps; lays each replica batch out as that many
        micro-batches, each a well-formed batch (see the module docstring).

    Returns:
      A dataset whose k-th element is the batch of the k-th replica this pipeline serves at
      the current step (replicas in order, then the next step). Each element is a dict of
      compact features (the step builds the dense masks, masks.dense_features):
        input_ids int32 [B, L], segment_ids int8 [B, L], perm_rank int32 [B, L] (the
        factorization order), target_positions int32 [B, P] (ascending, -1 padded),
        stream_id / chunk_index / direction / pass_id int32 [B].
    """
    data = PretrainData.read(data_dirs)
    data.check(seq_len=seq_len, reuse_len=reuse_len, num_predict=num_predict, bi_data=bi_data,
               vocab_size=vocab_size)
    return data.dataset(global_batch_size, input_context=input_context, start_step=start_step,
                        online_permutation=online_permutation, seed=seed,
                        micro_batches=micro_batches)
