#include "train/command_line_agreement.hpp"

#include <algorithm>
#include <cstdint>
#include <span>

#include "core/error.hpp"
#include "core/message_text.hpp"

namespace mgt {

namespace {

// The arguments as one byte string, each ended by a NUL.
std::vector<std::uint8_t> joined(const std::vector<std::string>& arguments) {
  std::vector<std::uint8_t> bytes;
  for (const std::string& a : arguments) {
    bytes.insert(bytes.end(), a.begin(), a.end());
    bytes.push_back(0);
  }
  return bytes;
}

std::vector<std::string> split(const std::vector<std::uint8_t>& bytes) {
  std::vector<std::string> arguments;
  std::string current;
  for (const std::uint8_t b : bytes) {
    if (b == 0) {
      arguments.push_back(current);
      current.clear();
    } else {
      current += static_cast<char>(b);
    }
  }
  return arguments;
}

// `root`'s arguments on every rank: their length, then their bytes.
std::vector<std::string> broadcast_arguments(dist::Communicator& world, const std::vector<std::string>& mine, int root) {
  std::vector<std::uint8_t> bytes = joined(mine);
  std::int64_t size = static_cast<std::int64_t>(bytes.size());
  world.broadcast(std::span<std::int64_t>(&size, 1), root);
  bytes.resize(static_cast<std::size_t>(size));
  if (size > 0) world.broadcast(std::span<std::uint8_t>(bytes), root);
  return split(bytes);
}

std::string shown(const std::vector<std::string>& arguments, std::size_t i) {
  return i < arguments.size() ? quoted_for_message(arguments[i]) : "nothing";
}

}  // namespace

std::vector<std::string> rank_independent_arguments(int argc, const char* const* argv) {
  std::vector<std::string> arguments;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.starts_with("--local-rank") || a.starts_with("--local_rank")) {
      if (a.find('=') == std::string::npos && i + 1 < argc) ++i;  // its value
      continue;
    }
    arguments.push_back(a);
  }
  return arguments;
}

std::string command_line_difference(const std::vector<std::string>& mine, const std::vector<std::string>& reference) {
  const std::size_t n = std::max(mine.size(), reference.size());
  for (std::size_t i = 0; i < n; ++i) {
    if (i < mine.size() && i < reference.size() && mine[i] == reference[i]) continue;
    return "argument " + std::to_string(i + 1) + " is " + shown(mine, i) + " there and " + shown(reference, i) +
           " on rank 0";
  }
  return {};
}

void require_same_command_line(dist::Communicator& world, int argc, const char* const* argv) {
  if (world.size() == 1) return;
  const std::vector<std::string> mine = rank_independent_arguments(argc, argv);
  const std::vector<std::string> reference = broadcast_arguments(world, mine, 0);
  // The lowest rank whose arguments differ (world size where none does), known to every rank.
  std::int64_t differing = command_line_difference(mine, reference).empty() ? world.size() : world.rank();
  std::int64_t negated = -differing;
  world.all_reduce(std::span<std::int64_t>(&negated, 1), dist::ReduceOp::Max);
  differing = -negated;
  if (differing == world.size()) return;
  const std::vector<std::string> theirs = broadcast_arguments(world, mine, static_cast<int>(differing));
  throw UsageError("rank " + std::to_string(differing) + " was started with other arguments than rank 0 (" +
                   command_line_difference(theirs, reference) + "): every rank of a run takes the same command line");
}

}  // namespace mgt
