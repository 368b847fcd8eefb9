// --per-split-data-args-path FILE: Megatron's JSON file standing for --train-data-path,
// --valid-data-path and --test-data-path when their lists are too long for a command line
// (megatron/training/utils.py get_blend_and_blend_per_split): an object with the keys "train",
// "valid" and "test", each a list of strings or one string of whitespace-separated words
// (weights and prefixes, or prefixes), or null for a split without data.
#pragma once
#include "data/dataset_flags.hpp"

namespace mgt {

// With --per-split-data-args-path given, reads the file into the three per-split lists and clears
// the path (a second call finds nothing to do). Refused with a message naming the file (and the
// key): beside --data-path, --data-args-path or a per-split path; a file that is not such an
// object; a key missing (Megatron's KeyError) or of another type; an empty list or string
// (Megatron cannot read one: null leaves a split out).
void read_per_split_data_args(DatasetSourceOptions& options);

}  // namespace mgt
