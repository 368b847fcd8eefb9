#include "generate/server_request.hpp"

#include <simdjson.h>

#include <limits>
#include <map>

#include "core/json_wide_integers.hpp"
#include "generate/sampling.hpp"

namespace mgt {

namespace {

namespace dom = simdjson::dom;

// Megatron checks types with Python's isinstance on json.loads' values: a bool is an int (True
// is 1), an int is not a float (top_p must be written 0.5, not 1), and temperature takes both.
bool is_int(dom::element e) {
  const dom::element_type t = e.type();
  return t == dom::element_type::INT64 || t == dom::element_type::UINT64 || t == dom::element_type::BOOL;
}
bool is_float(dom::element e) { return e.type() == dom::element_type::DOUBLE; }
bool is_number(dom::element e) { return is_int(e) || is_float(e); }
bool is_bool(dom::element e) { return e.type() == dom::element_type::BOOL; }

// Integers beyond int64 saturate: every check they meet refuses them as too large anyway.
int64_t int_value(dom::element e) {
  switch (e.type()) {
    case dom::element_type::BOOL: return bool(e) ? 1 : 0;
    case dom::element_type::UINT64: {
      const uint64_t v = uint64_t(e);
      return v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max()
                                                                             : static_cast<int64_t>(v);
    }
    default: return int64_t(e);
  }
}
double number_value(dom::element e) {
  if (is_float(e)) return double(e);
  if (e.type() == dom::element_type::UINT64) return static_cast<double>(uint64_t(e));
  return static_cast<double>(int_value(e));
}

// The body's members; a key given twice keeps its last value, as json.loads does.
class RequestFields {
public:
  explicit RequestFields(dom::object object) {
    for (dom::key_value_pair field : object) fields_[std::string(field.key)] = field.value;
  }
  bool has(const std::string& key) const { return fields_.count(key) > 0; }
  dom::element operator[](const std::string& key) const { return fields_.at(key); }

  // A boolean member: absent leaves `value`; another type is refused with "KEY must be a
  // boolean value".
  void boolean(const std::string& key, bool& value) const {
    if (!has(key)) return;
    const dom::element e = (*this)[key];
    if (!is_bool(e)) throw BadRequest(key + " must be a boolean value");
    value = bool(e);
  }

private:
  std::map<std::string, dom::element> fields_;
};

void parse_prompts(const RequestFields& f, ServerRequest& r) {
  const dom::element prompts = f["prompts"];
  if (prompts.type() != dom::element_type::ARRAY) throw BadRequest("prompts is not a list of strings");
  const dom::array list = prompts;
  if (list.size() == 0) throw BadRequest("prompts is empty");
  if (static_cast<int64_t>(list.size()) > kMaxPromptsPerRequest)
    throw BadRequest("Maximum number of prompts is " + std::to_string(kMaxPromptsPerRequest));
  for (dom::element prompt : list) {
    // Megatron would fail on a non-string later, tokenizing it; refuse it here.
    if (prompt.type() != dom::element_type::STRING) throw BadRequest("prompts is not a list of strings");
    r.prompts.emplace_back(std::string_view(prompt));
  }
}

void parse_sampling(const RequestFields& f, ServerRequest& r) {
  if (f.has("temperature")) {
    const dom::element e = f["temperature"];
    if (!is_number(e)) throw BadRequest("temperature must be a positive number less than or equal to 1000.0");
    r.temperature = number_value(e);
    if (!(0.0 < r.temperature && r.temperature <= 100.0))
      throw BadRequest("temperature must be a positive number less than or equal to 100.0");
  }
  if (f.has("top_k")) {
    const dom::element e = f["top_k"];
    if (!is_int(e))
      throw BadRequest("top_k must be an integer equal to or greater than 0 and less than or equal to 1000");
    r.top_k = int_value(e);
    if (!(0 <= r.top_k && r.top_k <= 1000))
      throw BadRequest("top_k must be equal to or greater than 0 and less than or equal to 1000");
  }
  if (f.has("top_p")) {
    const dom::element e = f["top_p"];
    if (!is_float(e)) throw BadRequest("top_p must be a positive float less than or equal to 1.0");
    r.top_p = double(e);
    if (r.top_p > 0.0 && r.top_k > 0) throw BadRequest("cannot set both top-k and top-p samplings.");
    if (!(0.0 <= r.top_p && r.top_p <= 1.0)) throw BadRequest("top_p must be less than or equal to 1.0");
  }
  if (f.has("top_p_decay")) {
    const dom::element e = f["top_p_decay"];
    if (!is_float(e)) throw BadRequest("top_p_decay must be a positive float less than or equal to 1.0");
    r.top_p_decay = double(e);
    if (r.top_p == 0.0) throw BadRequest("top_p_decay cannot be set without top_p");
    if (!(0.0 <= r.top_p_decay && r.top_p_decay <= 1.0))
      throw BadRequest("top_p_decay must be less than or equal to 1.0");
  }
  if (f.has("top_p_bound")) {
    const dom::element e = f["top_p_bound"];
    if (!is_float(e)) throw BadRequest("top_p_bound must be a positive float less than or equal to top_p");
    r.top_p_bound = double(e);
    if (r.top_p == 0.0) throw BadRequest("top_p_bound cannot be set without top_p");
    if (!(0.0 < r.top_p_bound && r.top_p_bound <= r.top_p))
      throw BadRequest("top_p_bound must be greater than 0 and less than top_p");
  }
}

}  // namespace

ServerRequest parse_server_request(std::string_view body) {
  // json.loads takes any integer; simdjson stops at 64 bits. Say which value is too large rather
  // than that the body is not JSON.
  if (const std::vector<WideJsonInteger> wide = find_wide_json_integers(body); !wide.empty())
    throw BadRequest((wide.front().path.empty() ? std::string("the request body") : wide.front().path) + " is " +
                     wide.front().literal + ", too large: integers in a request must fit in 64 bits");
  dom::parser parser;
  dom::element document;
  if (const simdjson::error_code e = parser.parse(body.data(), body.size()).get(document); e != simdjson::SUCCESS)
    throw BadRequest(std::string("the request body is not valid JSON (") + simdjson::error_message(e) + ")");
  if (document.type() != dom::element_type::OBJECT) throw BadRequest("the request body must be a JSON object");
  const RequestFields f{dom::object(document)};

  // In Megatron's order: the first failing check gives the message.
  if (!f.has("prompts")) throw BadRequest("prompts argument required");
  if (f.has("max_len")) throw BadRequest("max_len is no longer used.  Replace with tokens_to_generate");
  if (f.has("sentences")) throw BadRequest("sentences is no longer used.  Replace with prompts");
  if (f.has("beam_width")) throw BadRequest("Beam search is no longer supported.");
  ServerRequest r;
  parse_prompts(f, r);

  if (f.has("tokens_to_generate")) {
    const dom::element e = f["tokens_to_generate"];
    if (!is_int(e)) throw BadRequest("tokens_to_generate must be an integer greater than 0");
    r.tokens_to_generate = int_value(e);
    if (r.tokens_to_generate < 0) throw BadRequest("tokens_to_generate must be an integer greater than or equal to 0");
  }
  f.boolean("logprobs", r.logprobs);
  if (r.tokens_to_generate == 0 && !r.logprobs) throw BadRequest("tokens_to_generate=0 implies logprobs should be True");

  parse_sampling(f, r);

  f.boolean("add_BOS", r.add_bos);
  for (const std::string& prompt : r.prompts)
    if (prompt.empty() && !r.add_bos) throw BadRequest("Empty prompts require add_BOS=true");
  f.boolean("stop_on_double_eol", r.stop_on_double_eol);
  f.boolean("stop_on_eol", r.stop_on_eol);
  f.boolean("prevent_newline_after_colon", r.prevent_newline_after_colon);
  if (f.has("random_seed")) {
    const dom::element e = f["random_seed"];
    if (!is_int(e)) throw BadRequest("random_seed must be integer");
    if (e.type() == dom::element_type::UINT64) {
      r.random_seed = uint64_t(e);
    } else {
      const int64_t seed = int_value(e);
      if (seed < 0) throw BadRequest("random_seed must be a positive integer");
      r.random_seed = static_cast<uint64_t>(seed);
    }
  }
  f.boolean("no_log", r.no_log);
  if (f.has("stop_token")) {
    const dom::element e = f["stop_token"];
    if (!is_int(e)) throw BadRequest("stop_token must be an integer");
    r.stop_token = int_value(e);
  }
  if (f.has("length_penalty")) {
    const dom::element e = f["length_penalty"];
    if (!is_float(e)) throw BadRequest("length_penalty must be a float");
    r.length_penalty = double(e);
  }
  return r;
}

GenerationSettings generation_settings(const ServerRequest& r, int64_t vocab_size) {
  GenerationSettings s;
  s.max_new_tokens = r.tokens_to_generate;
  s.sampling.temperature = r.temperature;
  s.sampling.top_k = r.top_k;
  s.sampling.top_p = r.top_p;
  s.sampling.top_p_decay = r.top_p_decay;
  s.sampling.top_p_bound = r.top_p_bound;
  s.return_log_probs = r.logprobs;
  s.return_prompt_log_probs = r.logprobs;
  s.add_bos = r.add_bos;
  s.stop_on_eol = r.stop_on_eol;
  s.stop_on_double_eol = r.stop_on_double_eol;
  s.prevent_newline_after_colon = r.prevent_newline_after_colon;
  if (r.top_k > vocab_size)
    throw BadRequest("top_k must be less than or equal to the vocabulary size (" + std::to_string(vocab_size) + ")");
  try {
    validate_sampling(s.sampling, vocab_size);
  } catch (const Error& e) {
    throw BadRequest(e.what());  // Megatron's checks above are stricter; this is a safety net
  }
  return s;
}

}  // namespace mgt
