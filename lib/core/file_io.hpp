// Plain POSIX file writes, retried until complete: write(2) may write less than asked, or be
// interrupted by a signal before writing anything.
#pragma once
#include <cstddef>
#include <string>

namespace mgt {

// Writes all `size` bytes to `fd`. Throws mgt::Error "<what> '<path_for_errors>': <strerror>".
void write_all(int fd, const void* data, std::size_t size, const std::string& path_for_errors,
               const char* what = "cannot write");

}  // namespace mgt
