// Internal to lib/ckpt (includes hdf5.h): one owning wrapper per kind of HDF5 identifier, so
// every identifier is closed exactly once on every path, exceptions included. Handles live on
// the stack or in the reader's and writer's state, never in static storage, so none outlives
// the library's shutdown at exit. A file whose H5Fclose fails is a hazard of its own: HDF5 1.10
// frees the file but keeps its identifier, and its shutdown then crashes on it; files are written
// through DeferredErrorDriver (hdf5_write_driver.hpp), whose close cannot fail that way.
#pragma once
#include <hdf5.h>

#include <utility>

namespace mgt::ckpt::h5 {

template <herr_t (*Close)(hid_t)>
class Handle {
public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  ~Handle() { reset(); }
  Handle(Handle&& other) noexcept : id_(std::exchange(other.id_, H5I_INVALID_HID)) {}
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = std::exchange(other.id_, H5I_INVALID_HID);
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset() {
    if (id_ >= 0) Close(id_);
    id_ = H5I_INVALID_HID;
  }
  // Closes now and returns HDF5's status: closing a file flushes it and can fail.
  herr_t close() {
    hid_t id = std::exchange(id_, H5I_INVALID_HID);
    return id >= 0 ? Close(id) : 0;
  }

private:
  hid_t id_ = H5I_INVALID_HID;
};

using File = Handle<H5Fclose>;
using Group = Handle<H5Gclose>;
using Dataset = Handle<H5Dclose>;
using Dataspace = Handle<H5Sclose>;
using Datatype = Handle<H5Tclose>;
using Attribute = Handle<H5Aclose>;
using PropertyList = Handle<H5Pclose>;
using Object = Handle<H5Oclose>;

}  // namespace mgt::ckpt::h5
