// The threads of mgt-tokenize: one reader cuts the input into batches of lines, N workers
// encode whole batches, and the calling thread receives the batches in input order (so the
// output is the same for any number of workers). Memory is bounded by a fixed pool of batches
// that are recycled, never by the size of the input.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/document_encoder.hpp"
#include "data/input_stream.hpp"

namespace mgt {

struct LineBatch {
  struct Line {
    std::size_t offset = 0, length = 0;  // in text
    std::uint64_t number = 0;            // line number in its file
    std::uint32_t file = 0;              // index into the input paths
  };
  struct BadLine {
    std::size_t line = 0;  // index into lines
    std::string message;
  };

  std::uint64_t sequence = 0;
  std::string text;  // the lines back to back, without terminators
  std::vector<Line> lines;
  std::uint64_t stream_bytes = 0;     // decompressed input bytes, terminators included
  std::uint64_t stored_position = 0;  // stored bytes read from all inputs when this batch was cut
  // Set when reading or encoding failed at this point: delivered in order, like a line.
  std::exception_ptr failure;

  // What the workers made of the lines: per key, the documents of the good lines in order.
  std::vector<EncodedDocuments> encoded;
  std::vector<BadLine> bad_lines;  // in line order

  std::string_view line_text(std::size_t i) const { return {text.data() + lines[i].offset, lines[i].length}; }
  void clear();
};

struct PipelineSettings {
  std::size_t batch_bytes = 1 << 20;  // a batch is cut once it holds this many bytes of lines
  std::size_t max_batch_lines = 1 << 16;
  bool stop_at_bad_line = true;  // a worker gives up on a batch at its first bad line
  // Called on the calling thread before each batch and, while waiting for one, every
  // poll_interval: the way to stop the run from outside (a signal) by throwing.
  std::function<void()> poll;
  std::chrono::milliseconds poll_interval{100};
};

// Reads every line of `input`, encodes them with one thread per encoder, and calls `consume` on
// the calling thread with each batch in input order. The first failure (reading, an exception
// in a worker, or thrown by consume or settings.poll) stops all threads and is rethrown here.
void run_tokenize_pipeline(InputLines& input, std::vector<std::unique_ptr<DocumentEncoder>>& encoders,
                           const PipelineSettings& settings,
                           const std::function<void(const LineBatch&)>& consume);

}  // namespace mgt
