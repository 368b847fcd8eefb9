// Internal to lib/ckpt (includes hdf5.h): the file driver checkpoint shards are written through.
//
// With HDF5's own POSIX driver, a write that fails (a full disk) inside H5Fclose's final flush
// makes H5Fclose fail after it has already freed the file, and HDF5 1.10 keeps the dangling ID:
// the process then crashes in HDF5's clean-up at exit. So HDF5 must never see a write fail. This
// driver does plain POSIX I/O, but when a write fails it keeps the bytes in memory (later reads
// see them, so HDF5's view of the file stays consistent), remembers the first error, and reports
// success; every HDF5 call, H5Fclose included, then completes normally. The writer asks
// failure() after each step and throws the error itself, and the staging directory the file is
// in goes away with it. Only writes (and truncation and close) are deferred; a file that cannot
// be opened, or a read that fails, fails at once as HDF5 errors do.
//
// Each writer registers its own instance and unregisters it once its file is closed, so no HDF5
// identifier lives in static storage.
#pragma once
#include <hdf5.h>

#include <memory>
#include <optional>
#include <string>

#include "ckpt/hdf5_handle.hpp"

namespace mgt::ckpt::h5 {

// The first failed system call of a file written through the driver.
struct WriteFailure {
  std::string call;  // "write", "ftruncate", "close", "read"
  int error = 0;     // its errno
  std::string message() const;  // "write failed: No space left on device"
};

class DeferredErrorDriver {
public:
  DeferredErrorDriver();  // registers the driver with HDF5
  ~DeferredErrorDriver();  // unregisters it; close the files opened through it first
  DeferredErrorDriver(const DeferredErrorDriver&) = delete;
  DeferredErrorDriver& operator=(const DeferredErrorDriver&) = delete;

  // File access properties (file_access_properties' settings) whose files go through this driver.
  PropertyList file_access(const std::string& context) const;
  // The first failure of any file opened through file_access(); nullopt while all went well.
  std::optional<WriteFailure> failure() const;

  struct State;

private:
  std::unique_ptr<State> state_;
  Handle<H5FDunregister> driver_;
};

}  // namespace mgt::ckpt::h5
