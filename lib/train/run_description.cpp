#include "train/run_description.hpp"

#include <optional>

#include "data/python_json.hpp"

namespace mgt {

namespace {

PyValue integer_or_none(const std::optional<std::int64_t>& v) { return v ? PyValue::integer(*v) : PyValue::none(); }
PyValue real_or_none(const std::optional<double>& v) { return v ? PyValue::real(*v) : PyValue::none(); }

PyValue string_list(const std::vector<std::string>& items) {
  PyValue list = PyValue::list();
  for (const auto& s : items) list.append(PyValue::string(s));
  return list;
}

PyValue list_or_none(const std::vector<std::string>& items) {
  return items.empty() ? PyValue::none() : string_list(items);
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
  const ModelShapeOptions& m = o.model;
  a.set("num_layers", integer_or_none(m.num_layers));
  a.set("hidden_size", integer_or_none(m.hidden_size));
  a.set("num_attention_heads", integer_or_none(m.num_attention_heads));
  a.set("ffn_hidden_size", integer_or_none(m.ffn_hidden_size));
  a.set("kv_channels", integer_or_none(m.kv_channels));
  a.set("group_query_attention", PyValue::boolean(m.group_query_attention));
  a.set("num_query_groups", PyValue::integer(m.query_groups()));
  a.set("seq_length", integer_or_none(m.seq_length));
  a.set("max_position_embeddings", integer_or_none(m.max_position_embeddings));
  a.set("position_embedding_type", PyValue::string(m.position_embedding_type));
  a.set("rotary_percent", PyValue::real(m.rotary_percent));
  a.set("rotary_base", PyValue::integer(m.rotary_base));
  a.set("use_rope_scaling", PyValue::boolean(m.use_rope_scaling));
  a.set("rope_scaling_factor", PyValue::real(m.rope_scaling_factor));
  a.set("normalization", PyValue::string(m.normalization));
  a.set("norm_epsilon", PyValue::real(m.norm_epsilon));
  a.set("apply_layernorm_1p", PyValue::boolean(m.apply_layernorm_1p));
  a.set("swiglu", PyValue::boolean(m.swiglu));
  a.set("openai_gelu", PyValue::boolean(m.openai_gelu));
  a.set("add_bias_linear", PyValue::boolean(m.add_bias_linear));
  a.set("bias_gelu_fusion", PyValue::boolean(m.bias_gelu_fusion && m.add_bias_linear));
  a.set("untie_embeddings_and_output_weights", PyValue::boolean(m.untie_embeddings_and_output_weights));
  a.set("hidden_dropout", PyValue::real(m.hidden_dropout));
  a.set("attention_dropout", PyValue::real(m.attention_dropout));
  a.set("init_method_std", PyValue::real(m.init_method_std));
  a.set("make_vocab_size_divisible_by", PyValue::integer(m.make_vocab_size_divisible_by));
  a.set("padded_vocab_size", PyValue::integer(padded_vocab_size));
  a.set("recompute_granularity", PyValue::string_or_none(m.recompute_granularity));
  a.set("recompute_method", PyValue::string_or_none(m.recompute_method));
  a.set("recompute_num_layers", integer_or_none(m.recompute_num_layers));

  const OptimizationOptions& t = o.optim;
  a.set("micro_batch_size", integer_or_none(t.micro_batch_size));
  a.set("global_batch_size", integer_or_none(t.global_batch_size));
  a.set("train_iters", integer_or_none(t.train_iters));
  a.set("train_samples", integer_or_none(t.train_samples));
  // Megatron keeps the flag's strings (nargs='*').
  a.set("rampup_batch_size", t.rampup_batch_size ? string_list({std::to_string(t.rampup_batch_size->start),
                                                                 std::to_string(t.rampup_batch_size->increment),
                                                                 std::to_string(t.rampup_batch_size->samples)})
                                                 : PyValue::none());
  a.set("lr", real_or_none(t.lr));
  a.set("min_lr", PyValue::real(t.min_lr));
  a.set("decoupled_lr", real_or_none(t.decoupled_lr));
  a.set("decoupled_min_lr", real_or_none(t.decoupled_min_lr));
  a.set("lr_decay_style", PyValue::string(t.lr_decay_style));
  a.set("lr_warmup_iters", PyValue::integer(t.lr_warmup_iters));
  a.set("lr_warmup_fraction", real_or_none(t.lr_warmup_fraction));
  a.set("lr_warmup_samples", PyValue::integer(t.lr_warmup_samples));
  a.set("lr_warmup_init", PyValue::real(t.lr_warmup_init));
  a.set("lr_decay_iters", integer_or_none(t.lr_decay_iters));
  a.set("lr_decay_samples", integer_or_none(t.lr_decay_samples));
  a.set("lr_wsd_decay_style", PyValue::string(t.lr_wsd_decay_style));
  a.set("lr_wsd_decay_iters", integer_or_none(t.lr_wsd_decay_iters));
  a.set("lr_wsd_decay_samples", integer_or_none(t.lr_wsd_decay_samples));
  a.set("weight_decay", PyValue::real(t.weight_decay));
  a.set("start_weight_decay", real_or_none(t.start_weight_decay));
  a.set("end_weight_decay", real_or_none(t.end_weight_decay));
  a.set("weight_decay_incr_style", PyValue::string(t.weight_decay_incr_style));
  a.set("clip_grad", PyValue::real(t.clip_grad));
  a.set("calculate_per_token_loss", PyValue::boolean(t.calculate_per_token_loss));
  a.set("adam_beta1", PyValue::real(t.adam_beta1));
  a.set("adam_beta2", PyValue::real(t.adam_beta2));
  a.set("adam_eps", PyValue::real(t.adam_eps));
  a.set("optimizer", PyValue::string(t.optimizer));
  a.set("seed", PyValue::integer(t.seed));
  a.set("bf16", PyValue::boolean(t.precision == Precision::Bf16));
  a.set("fp16", PyValue::boolean(t.precision == Precision::Fp16));
  a.set("params_dtype", PyValue::string(precision_name(t.precision)));

  const DataOptions& d = o.data;
  a.set("data_path", list_or_none(d.data_path));
  a.set("data_args_path", PyValue::string_or_none(d.data_args_path));
  a.set("train_data_path", list_or_none(d.train_data_path));
  a.set("valid_data_path", list_or_none(d.valid_data_path));
  a.set("test_data_path", list_or_none(d.test_data_path));
  a.set("split", PyValue::string_or_none(d.split));
  a.set("data_cache_path", PyValue::string_or_none(d.data_cache_path));
  a.set("mock_data", PyValue::boolean(d.mock_data));
  a.set("dataloader_type", PyValue::string(d.dataloader_type));
  a.set("tokenizer_type", PyValue::string(d.tokenizer.type));
  a.set("vocab_file", d.tokenizer.vocab_file.empty() ? PyValue::none() : PyValue::string(d.tokenizer.vocab_file));
  a.set("merge_file", d.tokenizer.merge_file.empty() ? PyValue::none() : PyValue::string(d.tokenizer.merge_file));
  a.set("vocab_size", integer_or_none(d.tokenizer.vocab_size));
  a.set("vocab_extra_ids", PyValue::integer(d.tokenizer.vocab_extra_ids));
  a.set("eod_mask_loss", PyValue::boolean(d.eod_mask_loss));
  a.set("reset_position_ids", PyValue::boolean(d.reset_position_ids));
  a.set("reset_attention_mask", PyValue::boolean(d.reset_attention_mask));

  const CheckpointOptions& c = o.checkpoint;
  a.set("save", PyValue::string_or_none(c.save));
  a.set("save_interval", integer_or_none(c.save_interval));
  a.set("load", PyValue::string_or_none(c.load));
  a.set("no_save_optim", PyValue::boolean(c.no_save_optim));
  a.set("no_save_rng", PyValue::boolean(c.no_save_rng));
  a.set("no_load_optim", PyValue::boolean(c.no_load_optim));
  a.set("no_load_rng", PyValue::boolean(c.no_load_rng));
  a.set("finetune", PyValue::boolean(c.finetune));
  a.set("ckpt_format", PyValue::string("hdf5"));

  const LoggingOptions& l = o.logging;
  a.set("log_interval", PyValue::integer(l.log_interval));
  a.set("eval_interval", PyValue::integer(l.eval_interval));
  a.set("eval_iters", PyValue::integer(l.eval_iters));
  a.set("exit_interval", integer_or_none(l.exit_interval));
  a.set("exit_duration_in_mins", integer_or_none(l.exit_duration_in_mins));
  a.set("exit_signal_handler", PyValue::boolean(l.exit_signal_handler));
  a.set("exit_signal", PyValue::string(l.exit_signal));
  a.set("log_throughput", PyValue::boolean(l.log_throughput));
  a.set("log_params_norm", PyValue::boolean(l.log_params_norm));
  a.set("log_num_zeros_in_grad", PyValue::boolean(l.log_num_zeros_in_grad));
  a.set("metrics_file", PyValue::string_or_none(l.metrics_file));

  const ParallelOptions& p = o.parallel;
  a.set("tensor_model_parallel_size", PyValue::integer(p.tensor_model_parallel_size));
  a.set("pipeline_model_parallel_size", PyValue::integer(p.pipeline_model_parallel_size));
  a.set("decoder_first_pipeline_num_layers", integer_or_none(p.decoder_first_pipeline_num_layers));
  a.set("decoder_last_pipeline_num_layers", integer_or_none(p.decoder_last_pipeline_num_layers));
  a.set("context_parallel_size", PyValue::integer(p.context_parallel_size));
  a.set("sequence_parallel", PyValue::boolean(p.sequence_parallel));
  a.set("use_distributed_optimizer", PyValue::boolean(p.use_distributed_optimizer));
  a.set("overlap_grad_reduce", PyValue::boolean(p.overlap_grad_reduce));
  a.set("overlap_param_gather", PyValue::boolean(p.overlap_param_gather));
  a.set("distributed_backend", PyValue::string(p.distributed_backend));
  a.set("distributed_timeout_minutes", PyValue::integer(p.distributed_timeout_minutes));
  a.set("world_size", PyValue::integer(p.world_size));
  a.set("data_parallel_size", PyValue::integer(p.data_parallel_size));
  return a.dumps();
}

std::string tokenizer_description_json(const TokenizerOptions& options, const Tokenizer& tokenizer,
                                       std::int64_t padded_vocab_size) {
  PyValue t = PyValue::dict();
  t.set("tokenizer_type", PyValue::string(options.type));
  t.set("class", PyValue::string(tokenizer.class_name()));
  t.set("vocab_file", options.vocab_file.empty() ? PyValue::none() : PyValue::string(options.vocab_file));
  t.set("merge_file", options.merge_file.empty() ? PyValue::none() : PyValue::string(options.merge_file));
  t.set("vocab_size", integer_or_none(options.vocab_size));
  t.set("vocab_extra_ids", PyValue::integer(options.vocab_extra_ids));
  t.set("tokenizer_model", options.tokenizer_model.empty() ? PyValue::none() : PyValue::string(options.tokenizer_model));
  t.set("tiktoken_pattern", options.tiktoken_pattern.empty() ? PyValue::none() : PyValue::string(options.tiktoken_pattern));
  t.set("tiktoken_num_special_tokens", PyValue::integer(options.tiktoken_num_special_tokens));
  if (options.tiktoken_special_tokens) {
    // One space-separated string: the checkpoint's tokenizer record holds scalars only.
    std::string joined;
    for (const std::string& token : *options.tiktoken_special_tokens) joined += (joined.empty() ? "" : " ") + token;
    t.set("tiktoken_special_tokens", PyValue::string(joined));
  }
  t.set("true_vocab_size", PyValue::integer(tokenizer.vocab_size()));
  t.set("padded_vocab_size", PyValue::integer(padded_vocab_size));
  t.set("eod", PyValue::integer(tokenizer.eod()));
  const auto pad = tokenizer.pad();
  t.set("pad", pad ? PyValue::integer(*pad) : PyValue::none());
  return t.dumps();
}

}  // namespace mgt
