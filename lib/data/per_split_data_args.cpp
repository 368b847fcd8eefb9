#include "data/per_split_data_args.hpp"

#include <simdjson.h>

#include <array>
#include <sstream>

#include "core/error.hpp"
#include "core/input_file.hpp"

namespace mgt {

void read_per_split_data_args(DatasetSourceOptions& o) {
  if (!o.per_split_data_args_path) return;
  const std::string& path = *o.per_split_data_args_path;
  if (!o.data_path.empty() || o.data_args_path)
    throw UsageError("--per-split-data-args-path and --data-path (or --data-args-path) are mutually exclusive");
  if (!o.train_data_path.empty() || !o.valid_data_path.empty() || !o.test_data_path.empty())
    throw UsageError("--per-split-data-args-path and --train-data-path/--valid-data-path/--test-data-path are "
                     "mutually exclusive");
  const std::string where = "--per-split-data-args-path " + path;
  const simdjson::padded_string text(read_input_file(path, "--per-split-data-args-path"));
  simdjson::dom::parser parser;
  simdjson::dom::element document;
  if (const auto error = parser.parse(text).get(document))
    throw UsageError(where + ": malformed JSON (" + simdjson::error_message(error) + ")");
  simdjson::dom::object object;
  if (document.get_object().get(object))
    throw UsageError(where + ": expected a JSON object with the keys \"train\", \"valid\" and \"test\"");
  const std::array<std::pair<const char*, std::vector<std::string>*>, 3> splits = {
      {{"train", &o.train_data_path}, {"valid", &o.valid_data_path}, {"test", &o.test_data_path}}};
  for (const auto& [key, list] : splits) {
    simdjson::dom::element value;
    if (object[key].get(value)) throw UsageError(where + ": no \"" + key + "\" key");
    const std::string what = where + ": \"" + key + "\"";
    if (value.is_null()) continue;
    if (value.is_string()) {
      std::istringstream words{std::string(std::string_view(value.get_string()))};
      for (std::string w; words >> w;) list->push_back(w);
    } else if (value.is_array()) {
      for (simdjson::dom::element item : value.get_array()) {
        std::string_view s;
        if (item.get_string().get(s)) throw UsageError(what + " must hold strings only");
        list->emplace_back(s);
      }
    } else {
      throw UsageError(what + " must be a list of strings, a string or null");
    }
    if (list->empty()) throw UsageError(what + " is empty (give null for a split without data)");
  }
  if (o.train_data_path.empty() && o.valid_data_path.empty() && o.test_data_path.empty())
    throw UsageError(where + ": every split is null");
  o.per_split_data_args_path.reset();  // read: the lists stand for it from here on
}

}  // namespace mgt
