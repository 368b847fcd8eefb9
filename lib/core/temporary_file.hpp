// Temporaries in the directory of the file they become, under names nobody can guess, created
// with O_CREAT | O_EXCL | O_NOFOLLOW: whatever already sits at a name (a symlink planted there
// included) is never opened, truncated or followed, and the next random name is tried instead.
// Every writer of mgt creates its temporaries here, through AtomicFile or directly.
#pragma once
#include <sys/types.h>

#include <string>

namespace mgt {

// An open, freshly created, empty file: FINAL_PATH.tmp.XXXXXXXXXXXX in FINAL_PATH's directory.
// The descriptor is the caller's to close.
struct TemporaryFile {
  int fd = -1;
  std::string path;
};

// `mode` as for open(2), the umask applying. Throws mgt::Error naming the directory when no
// temporary can be created there.
TemporaryFile create_temporary_file(const std::string& final_path, mode_t mode = 0666);

// For writers whose library opens the file by name (HDF5's H5Fcreate): creates the temporary as
// above and closes it, returning its name. Open that name with truncation (H5F_ACC_TRUNC), never
// with an exclusive flag: the empty file is already there, owned by this process, and its
// unpredictable name is what keeps others from planting anything at it first.
std::string reserve_temporary_path(const std::string& final_path, mode_t mode = 0666);

// Creates `path` itself exclusively (fails when anything exists there, a dangling symlink
// included); returns the open descriptor. For names inside a directory only this process writes.
int create_exclusive_file(const std::string& path, mode_t mode = 0666);

// A new empty directory FINAL_PATH.partial.XXXXXXXXXXXX beside FINAL_PATH, for outputs assembled
// as a directory and renamed into place. Its mode is the one the final directory should have:
// 0777 less the umask.
std::string create_temporary_directory(const std::string& final_path);

// `count` characters from [A-Za-z0-9], from the kernel's random source.
std::string random_name_suffix(std::size_t count = 12);

}  // namespace mgt
