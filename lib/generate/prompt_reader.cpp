#include "generate/prompt_reader.hpp"

#include "core/error.hpp"

namespace mgt {

PromptReader::PromptReader(const std::string& path) : lines_({path}), parser_({"prompt"}, /*lists=*/false) {}

std::vector<std::string> PromptReader::next_batch(int64_t count) {
  std::vector<std::string> prompts;
  where_.clear();
  InputLine line;
  while (static_cast<int64_t>(prompts.size()) < count && lines_.next(line)) {
    if (line.text.find_first_not_of(" \t") == std::string_view::npos) continue;
    const std::string where = lines_.display_name(line.file_index) + ":" + std::to_string(line.number);
    try {
      parser_.parse(line.text);
    } catch (const Error& e) {
      throw Error(where + ": " + e.what());
    }
    if (parser_.is_list(0)) throw Error(where + ": \"prompt\" is a list; give one string per line");
    prompts.emplace_back(parser_.texts(0)[0]);
    where_.push_back(where);
    ++read_;
  }
  return prompts;
}

}  // namespace mgt
