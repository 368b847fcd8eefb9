// File-system steps of writing a checkpoint: creating entries with the checkpoint's modes
// (files 0640, directories 0750, both reduced by the process umask: checkpoints hold a run's
// weights and arguments, not for every user of a shared cluster) and making them durable.
#pragma once
#include <string>

namespace mgt::ckpt {

inline constexpr unsigned kCheckpointFileMode = 0640;
inline constexpr unsigned kCheckpointDirectoryMode = 0750;

// mkdir with kCheckpointDirectoryMode; an existing directory is fine.
void make_checkpoint_directory(const std::string& path);
// Creates missing parents too (like mkdir -p), each with kCheckpointDirectoryMode.
void make_checkpoint_directories(const std::string& path);
// Creates (or truncates) a file with kCheckpointFileMode.
void create_checkpoint_file(const std::string& path);
// fsync of a closed file's contents; throws mgt::Error on failure.
void sync_file(const std::string& path);
// rm -rf; throws mgt::Error naming the path on failure.
void remove_tree(const std::string& path);
bool path_exists(const std::string& path);
bool is_directory(const std::string& path);

}  // namespace mgt::ckpt
