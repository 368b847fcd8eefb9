#include "train/layout_plan_output.hpp"

#include <cstdio>
#include <ostream>
#include <string>

namespace mgt {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string recompute_name(RecomputeGranularity r) {
  return r == RecomputeGranularity::kNone ? "none" : std::string(to_string(r));
}

// The expert-parallel column, for a mixture of experts only.
std::string expert_column(const LayoutPlan& plan, const LayoutChoice& l) {
  if (!plan.experts) return "";
  char column[16];
  std::snprintf(column, sizeof column, " %3lld", static_cast<long long>(l.expert_parallel));
  return column;
}

std::string row(const LayoutPlan& plan, const PlannedLayout& p, std::size_t rank) {
  const LayoutChoice& l = p.layout;
  char line[256];
  std::snprintf(line, sizeof line, "%4s %3lld %3lld %3lld %3lld %3lld%s  %-8s %-10s %10.1f %10.4g %12.0f %6.1f%%",
                rank ? std::to_string(rank).c_str() : "-", static_cast<long long>(l.tensor_parallel),
                static_cast<long long>(l.pipeline_parallel), static_cast<long long>(l.virtual_pipeline),
                static_cast<long long>(l.context_parallel), static_cast<long long>(l.data_parallel),
                expert_column(plan, l).c_str(), l.distributed_optimizer ? "on" : "off", recompute_name(l.recompute).c_str(),
                static_cast<double>(p.memory.total_bytes) / kGiB, p.step.step_seconds,
                p.step.tokens_per_second_per_gpu, 100 * p.step.mfu);
  return std::string(line) + (p.given ? "  <- flags given" : "");
}

PyValue layout_json(const PlannedLayout& p) {
  const LayoutChoice& l = p.layout;
  PyValue v = PyValue::dict();
  v.set("tensor_model_parallel_size", PyValue::integer(l.tensor_parallel));
  v.set("pipeline_model_parallel_size", PyValue::integer(l.pipeline_parallel));
  v.set("virtual_pipeline_model_parallel_size", PyValue::integer(l.virtual_pipeline));
  v.set("context_parallel_size", PyValue::integer(l.context_parallel));
  v.set("data_parallel_size", PyValue::integer(l.data_parallel));
  v.set("expert_model_parallel_size", PyValue::integer(l.expert_parallel));
  v.set("use_distributed_optimizer", PyValue::boolean(l.distributed_optimizer));
  v.set("recompute_granularity", l.recompute == RecomputeGranularity::kNone
                                     ? PyValue::none()
                                     : PyValue::string(std::string(to_string(l.recompute))));
  v.set("memory_per_rank_bytes", p.memory.beyond_64_bits ? PyValue::none() : PyValue::integer(p.memory.total_bytes));
  v.set("fits", PyValue::boolean(p.fits));
  v.set("step_seconds", PyValue::real(p.step.step_seconds));
  v.set("tokens_per_second_per_gpu", PyValue::real(p.step.tokens_per_second_per_gpu));
  v.set("mfu", PyValue::real(p.step.mfu));
  v.set("given", PyValue::boolean(p.given));
  v.set("flags", PyValue::string(layout_flags(l)));
  return v;
}

}  // namespace

void write_layout_plan_table(const LayoutPlan& plan, std::ostream& out) {
  out << "layout plan for " << plan.world_size << " GPU" << (plan.world_size == 1 ? "" : "s") << ": "
      << plan.target.description << "\n";
  out << plan.considered << " layouts considered: " << plan.refused << " refused by mgt-train's checks, "
      << plan.too_large << " beyond the memory, " << plan.fitting.size() << " fit; best estimated step first\n";
  for (const std::string& note : plan.notes) out << "note: " << note << "\n";
  if (!plan.fitting.empty()) {
    out << "   #  TP  PP  VP  CP  DP" << (plan.experts ? "  EP" : "")
        << "  dist-opt recompute  mem/rank GiB     step s  tokens/s/GPU    MFU\n";
    bool given_shown = false;
    for (std::size_t i = 0; i < plan.fitting.size(); ++i) {
      const PlannedLayout& p = plan.fitting[i];
      if (i >= kLayoutTableRows && !p.given) continue;
      out << row(plan, p, i + 1) << "\n";
      given_shown = given_shown || p.given;
    }
    if (plan.fitting.size() > kLayoutTableRows)
      out << "(" << plan.fitting.size() - kLayoutTableRows << " more in the JSON's layout_plan)\n";
    out << "best: " << (layout_flags(plan.fitting.front().layout).empty() ? "(no parallelism flags)"
                                                                          : layout_flags(plan.fitting.front().layout))
        << "\n";
    if (!given_shown) out << "flags given:\n" << row(plan, plan.given, 0) << (plan.given.fits ? "" : "  (beyond the memory)") << "\n";
  } else {
    out << "no layout fits; the flags given:\n" << row(plan, plan.given, 0) << "\n";
  }
  char line[160];
  std::snprintf(line, sizeof line, "estimated step: %.4g s (%.0f tokens/s per GPU, MFU %.1f%%) for the flags given",
                plan.given.step.step_seconds, plan.given.step.tokens_per_second_per_gpu, 100 * plan.given.step.mfu);
  out << line << "\n";
}

PyValue layout_plan_json(const LayoutPlan& plan) {
  PyValue gpu = PyValue::dict();
  gpu.set("kind", PyValue::string(std::string(plan.target.gpu.key)));
  gpu.set("name", PyValue::string(std::string(plan.target.gpu.name)));
  gpu.set("memory_bytes", PyValue::integer(plan.target.memory_bytes));
  gpu.set("budget_bytes", PyValue::integer(plan.target.budget_bytes));
  gpu.set("memory_margin", PyValue::real(kPlannerMemoryMargin));
  gpu.set("description", PyValue::string(plan.target.description));
  gpu.set("cost_constants_source", PyValue::string(std::string(plan.target.gpu.source)));
  PyValue layouts = PyValue::list();
  for (const PlannedLayout& p : plan.fitting) layouts.append(layout_json(p));
  PyValue given = layout_json(plan.given);
  PyValue parts = PyValue::dict();
  const StepEstimate& e = plan.given.step;
  parts.set("gemm", PyValue::real(e.gemm_seconds));
  parts.set("attention", PyValue::real(e.attention_seconds));
  parts.set("memory_bound", PyValue::real(e.memory_bound_seconds));
  parts.set("tensor_parallel", PyValue::real(e.tensor_parallel_seconds));
  parts.set("context_parallel", PyValue::real(e.context_parallel_seconds));
  parts.set("expert_parallel", PyValue::real(e.expert_parallel_seconds));
  parts.set("pipeline_sends", PyValue::real(e.pipeline_send_seconds));
  parts.set("pipeline_bubble", PyValue::real(e.bubble_seconds));
  parts.set("data_parallel", PyValue::real(e.data_parallel_seconds));
  parts.set("optimizer", PyValue::real(e.optimizer_seconds));
  given.set("step_seconds_by_part", std::move(parts));
  PyValue notes = PyValue::list();
  for (const std::string& n : plan.notes) notes.append(PyValue::string(n));
  PyValue v = PyValue::dict();
  v.set("world_size", PyValue::integer(plan.world_size));
  v.set("gpu", std::move(gpu));
  v.set("considered", PyValue::integer(plan.considered));
  v.set("refused_by_validation", PyValue::integer(plan.refused));
  v.set("beyond_memory", PyValue::integer(plan.too_large));
  v.set("layouts", std::move(layouts));
  v.set("given_layout", std::move(given));
  v.set("notes", std::move(notes));
  return v;
}

}  // namespace mgt
