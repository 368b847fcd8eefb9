#include "train/run_description.hpp"

#include <variant>

#include "data/python_json.hpp"
#include "train/train_flags.hpp"

namespace mgt {

namespace {

// A flag's value as Megatron's args hold it: an unset path or list is None.
PyValue python_value(const ArgValue& value) {
  struct Convert {
    PyValue operator()(std::monostate) const { return PyValue::none(); }
    PyValue operator()(bool v) const { return PyValue::boolean(v); }
    PyValue operator()(std::int64_t v) const { return PyValue::integer(v); }
    PyValue operator()(double v) const { return PyValue::real(v); }
    PyValue operator()(const std::string& v) const { return v.empty() ? PyValue::none() : PyValue::string(v); }
    PyValue operator()(const std::vector<std::string>& v) const {
      if (v.empty()) return PyValue::none();
      PyValue list = PyValue::list();
      for (const auto& s : v) list.append(PyValue::string(s));
      return list;
    }
    PyValue operator()(const std::vector<std::int64_t>& v) const {
      PyValue list = PyValue::list();
      for (std::int64_t i : v) list.append(PyValue::integer(i));
      return list;
    }
  };
  return std::visit(Convert{}, value);
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::Bf16: return "bf16";
    case Precision::Fp16: return "fp16";
    case Precision::Fp32: break;
  }
  return "fp32";
}

}  // namespace

std::string train_args_json(const TrainOptions& o, std::int64_t padded_vocab_size) {
  PyValue a = PyValue::dict();
  TrainOptions values = o;  // the table binds to a mutable value; it only reads here
  for (const FlagDefinition& flag : train_flags(values))
    if (!flag.record_key().empty()) a.set(flag.record_key(), python_value(flag.recorded_value()));
  // Megatron's args that no flag sets: derived by validation or by the tokenizer, or fixed by mgt.
  a.set("padded_vocab_size", PyValue::integer(padded_vocab_size));
  a.set("params_dtype", PyValue::string(precision_name(o.optim.precision)));
  a.set("ckpt_format", PyValue::string("hdf5"));
  a.set("world_size", PyValue::integer(o.parallel.world_size));
  a.set("data_parallel_size", PyValue::integer(o.parallel.data_parallel_size));
  return a.dumps();
}

}  // namespace mgt
