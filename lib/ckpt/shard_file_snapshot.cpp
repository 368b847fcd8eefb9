#include "ckpt/shard_file_snapshot.hpp"

#include <sys/stat.h>

#include "ckpt/checkpoint_writer.hpp"
#include "core/error.hpp"

namespace mgt::ckpt {

std::uint64_t write_shard_snapshots(const std::string& dir, std::span<const ShardFileSnapshot> files,
                                    const SnapshotWriteOptions& options) {
  std::uint64_t bytes = 0;
  for (const ShardFileSnapshot& file : files) {
    const std::string path = dir + "/" + file.file_name;
    ShardWriter writer(path, file.metadata);
    for (const SnapshotTensor& tensor : file.tensors) writer.write(tensor.record, tensor.data.bytes());
    if (options.before_close) options.before_close(path);
    writer.close();
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) throw Error(system_error_message("cannot stat checkpoint file", path));
    bytes += static_cast<std::uint64_t>(st.st_size);
  }
  return bytes;
}

}  // namespace mgt::ckpt
