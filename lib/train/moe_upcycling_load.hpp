// --moe-use-upcycling's load (Megatron's load_and_upcycle_model): an MoE run's weights from the
// checkpoint of a dense model, in whatever layout that was saved. Each MoE layer's routed experts
// are cut from that layer's dense MLP (model/moe_upcycling.hpp) and the router's rows repeated;
// the shared experts keep their fresh initialisation, as in Megatron; every other weight is
// loaded as it is. The optimizer, random and FP8 state are not read: they start fresh.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "model/moe_upcycling.hpp"
#include "train/train_checkpoint.hpp"

namespace mgt {

struct UpcycledCheckpoint {
  std::string directory;  // the dense checkpoint's SAVE/iter_NNNNNNN
  UpcyclingPlan plan;
};

// Reads the checkpoint load_dir resumes (with a ckpt_step, that iteration's; nullopt when there is
// none) into parts.params. The dense
// MLP must hold --ffn-hidden-size × granularity hidden units. Progress: the consumed samples and
// FLOPs of the dense run, as Megatron's load_checkpoint leaves them (none with --finetune); the
// iteration is the caller's. mgt::Error naming the tensor when the checkpoint is not a dense
// model's or a shape differs.
std::optional<UpcycledCheckpoint> load_upcycled_checkpoint(const std::string& load_dir,
                                                           const TrainCheckpointParts& parts,
                                                           std::int64_t granularity, bool finetune,
                                                           std::optional<std::int64_t> ckpt_step = std::nullopt);

}  // namespace mgt
