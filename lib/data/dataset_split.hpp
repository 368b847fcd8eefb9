// Megatron's train/valid/test split of a dataset: the --split string, the split matrix of
// cumulative bounds, and the element range each split covers (spec/megatron.md §4.1).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "data/python_json.hpp"

namespace mgt {

enum class Split { Train = 0, Valid = 1, Test = 2 };
inline constexpr std::array<Split, 3> kAllSplits = {Split::Train, Split::Valid, Split::Test};
const char* split_name(Split split);  // "train", "valid", "test" (Megatron's Split enum names)

// Bounds (begin, end) as fractions of the dataset; nullopt for a split of zero width.
using SplitMatrix = std::array<std::optional<std::pair<double, double>>, 3>;

// parse_and_normalize_split: every run of digits and dots is a number, up to three of them,
// padded with zeros, divided by their sum. Throws mgt::UsageError naming --split when there are
// more than three numbers, a number does not parse, the sum is zero, or the text holds a sign
// or a letter (Megatron would silently drop a '-' and read "-5" as 5).
std::array<double, 3> parse_split(const std::string& text);

// convert_split_vector_to_split_matrix: cumulative sums from 0 as bookends.
SplitMatrix split_matrix(const std::array<double, 3>& weights);

// The split matrix as Megatron's description prints it: a list of [begin, end] pairs or null,
// the very first bound being the Python integer 0 from which the cumulative sum starts.
PyValue split_matrix_value(const SplitMatrix& matrix);

// Elements [begin, end) of a dataset of n elements: int(round(bound * float(n))), rounding
// half to even like Python's round().
std::pair<std::int64_t, std::int64_t> split_range(const std::pair<double, double>& bounds,
                                                  std::size_t n);

}  // namespace mgt
