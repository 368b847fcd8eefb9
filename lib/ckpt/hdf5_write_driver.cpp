#include "ckpt/hdf5_write_driver.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "ckpt/hdf5_error.hpp"
#include "ckpt/hdf5_types.hpp"
#include "core/error.hpp"

namespace mgt::ckpt::h5 {

struct DeferredErrorDriver::State {
  std::optional<WriteFailure> failure;
};

namespace {

// What HDF5 copies into a file access property list: where the writer's state is.
struct DriverInfo {
  DeferredErrorDriver::State* state;
};

// Bytes HDF5 wrote that are not on disk, oldest first.
struct UnwrittenBytes {
  haddr_t address;
  std::vector<unsigned char> bytes;
};

struct OpenFile {
  H5FD_t base;  // first: HDF5 sees this struct through a pointer to it
  int fd;
  haddr_t eoa;
  haddr_t eof;
  dev_t device;
  ino_t inode;
  DeferredErrorDriver::State* state;
  std::vector<UnwrittenBytes> unwritten;
};
// HDF5 hands back the H5FD_t it was given; turning it into the OpenFile around it needs the two
// to share their address.
static_assert(std::is_standard_layout_v<OpenFile>);

// The largest address the POSIX file offset can reach, as in HDF5's sec2 driver.
constexpr haddr_t kMaxAddress = (haddr_t{1} << (8 * sizeof(off_t) - 1)) - 1;

OpenFile* as_open(H5FD_t* file) { return reinterpret_cast<OpenFile*>(file); }
const OpenFile* as_open(const H5FD_t* file) { return reinterpret_cast<const OpenFile*>(file); }

void record(DeferredErrorDriver::State* state, const char* call, int error) {
  if (state != nullptr && !state->failure) state->failure = WriteFailure{call, error};
}

H5FD_t* open_file(const char* name, unsigned flags, hid_t fapl, haddr_t maxaddr) {
  const auto* info = static_cast<const DriverInfo*>(H5Pget_driver_info(fapl));
  DeferredErrorDriver::State* state = info != nullptr ? info->state : nullptr;
  if (name == nullptr || *name == '\0' || maxaddr == 0 || maxaddr == HADDR_UNDEF || maxaddr > kMaxAddress)
    return nullptr;
  int o_flags = (flags & H5F_ACC_RDWR) ? O_RDWR : O_RDONLY;
  if (flags & H5F_ACC_TRUNC) o_flags |= O_TRUNC;
  if (flags & H5F_ACC_CREAT) o_flags |= O_CREAT;
  if (flags & H5F_ACC_EXCL) o_flags |= O_EXCL;
  // HDF5 first opens without creating to see whether the file is open already, so a failed open
  // is no failure of ours: HDF5 reports it (the writer creates the file itself beforehand).
  const int fd = ::open(name, o_flags | O_CLOEXEC | O_NOFOLLOW, 0666);
  if (fd < 0) return nullptr;
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return nullptr;
  }
  auto file = std::make_unique<OpenFile>();
  std::memset(&file->base, 0, sizeof file->base);
  file->fd = fd;
  file->eoa = 0;
  file->eof = static_cast<haddr_t>(st.st_size);
  file->device = st.st_dev;
  file->inode = st.st_ino;
  file->state = state;
  return &file.release()->base;
}

herr_t close_file(H5FD_t* handle) {
  std::unique_ptr<OpenFile> file(as_open(handle));  // made by open_file
  if (::close(file->fd) != 0) record(file->state, "close", errno);
  return 0;
}

int compare_files(const H5FD_t* a, const H5FD_t* b) {
  const OpenFile* f = as_open(a);
  const OpenFile* g = as_open(b);
  if (f->device != g->device) return f->device < g->device ? -1 : 1;
  if (f->inode != g->inode) return f->inode < g->inode ? -1 : 1;
  return 0;
}

herr_t query_features(const H5FD_t* /*file*/, unsigned long* flags) {
  // What HDF5's sec2 driver declares, less the raw POSIX handle (ours is not one).
  if (flags != nullptr)
    *flags = H5FD_FEAT_AGGREGATE_METADATA | H5FD_FEAT_ACCUMULATE_METADATA | H5FD_FEAT_DATA_SIEVE |
             H5FD_FEAT_AGGREGATE_SMALLDATA;
  return 0;
}

haddr_t get_eoa(const H5FD_t* file, H5FD_mem_t /*type*/) { return as_open(file)->eoa; }

herr_t set_eoa(H5FD_t* file, H5FD_mem_t /*type*/, haddr_t address) {
  if (address > kMaxAddress) return -1;
  as_open(file)->eoa = address;
  return 0;
}

haddr_t get_eof(const H5FD_t* file, H5FD_mem_t /*type*/) { return as_open(file)->eof; }

herr_t get_handle(H5FD_t* file, hid_t /*fapl*/, void** handle) {
  if (handle == nullptr) return -1;
  *handle = &as_open(file)->fd;
  return 0;
}

herr_t read_file(H5FD_t* handle, H5FD_mem_t /*type*/, hid_t /*dxpl*/, haddr_t address, size_t size, void* buffer) {
  OpenFile* file = as_open(handle);
  if (address == HADDR_UNDEF || address + size > file->eoa || address + size < address) return -1;
  auto* out = static_cast<unsigned char*>(buffer);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(file->fd, out + done, size - done, static_cast<off_t>(address + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      // A failed read is an ordinary HDF5 error (not a close-time crash): let HDF5 report it.
      record(file->state, "read", errno);
      return -1;
    }
    if (n == 0) {  // past the end of the file: HDF5 expects zeros
      std::memset(out + done, 0, size - done);
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  // What HDF5 wrote but the disk refused, in the order it was written.
  for (const UnwrittenBytes& u : file->unwritten) {
    const haddr_t begin = std::max(address, u.address);
    const haddr_t end = std::min<haddr_t>(address + size, u.address + u.bytes.size());
    if (begin < end) std::memcpy(out + (begin - address), u.bytes.data() + (begin - u.address), end - begin);
  }
  return 0;
}

herr_t write_file(H5FD_t* handle, H5FD_mem_t /*type*/, hid_t /*dxpl*/, haddr_t address, size_t size,
                  const void* buffer) {
  OpenFile* file = as_open(handle);
  if (address == HADDR_UNDEF || address + size > file->eoa || address + size < address) return -1;
  const auto* in = static_cast<const unsigned char*>(buffer);
  bool failed = file->state != nullptr && file->state->failure.has_value();
  std::size_t done = 0;
  while (!failed && done < size) {
    const ssize_t n = ::pwrite(file->fd, in + done, size - done, static_cast<off_t>(address + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      record(file->state, "write", n < 0 ? errno : EIO);
      failed = true;
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  if (failed) file->unwritten.push_back({address, std::vector<unsigned char>(in, in + size)});
  file->eof = std::max<haddr_t>(file->eof, address + size);
  return 0;
}

herr_t truncate_file(H5FD_t* handle, hid_t /*dxpl*/, hbool_t /*closing*/) {
  OpenFile* file = as_open(handle);
  if (file->eoa == file->eof) return 0;
  if (::ftruncate(file->fd, static_cast<off_t>(file->eoa)) != 0) record(file->state, "ftruncate", errno);
  file->eof = file->eoa;
  return 0;
}

H5FD_class_t driver_class() {
  H5FD_class_t c;
  std::memset(&c, 0, sizeof c);
#if H5_VERSION_GE(1, 13, 0)
  c.version = H5FD_CLASS_VERSION;
  c.value = static_cast<H5FD_class_value_t>(620);  // unregistered values start at 256
#endif
  c.name = "mgt_deferred_error";
  c.maxaddr = kMaxAddress;
  c.fc_degree = H5F_CLOSE_WEAK;
  c.fapl_size = sizeof(DriverInfo);
  c.open = open_file;
  c.close = close_file;
  c.cmp = compare_files;
  c.query = query_features;
  c.get_eoa = get_eoa;
  c.set_eoa = set_eoa;
  c.get_eof = get_eof;
  c.get_handle = get_handle;
  c.read = read_file;
  c.write = write_file;
  c.truncate = truncate_file;
  const H5FD_mem_t map[H5FD_MEM_NTYPES] = H5FD_FLMAP_DICHOTOMY;
  std::copy(std::begin(map), std::end(map), std::begin(c.fl_map));
  return c;
}

}  // namespace

std::string WriteFailure::message() const { return call + " failed: " + std::strerror(error); }

DeferredErrorDriver::DeferredErrorDriver() : state_(std::make_unique<State>()) {
  silence_errors();
  // HDF5 copies the class table when registering.
  const H5FD_class_t c = driver_class();
  driver_ = Handle<H5FDunregister>(check_id(H5FDregister(&c), "H5FDregister", "checkpoint file driver"));
}

DeferredErrorDriver::~DeferredErrorDriver() = default;

PropertyList DeferredErrorDriver::file_access(const std::string& context) const {
  PropertyList fapl = file_access_properties(context);
  const DriverInfo info{state_.get()};
  check(H5Pset_driver(fapl.get(), driver_.get(), &info), "H5Pset_driver", context);
  return fapl;
}

std::optional<WriteFailure> DeferredErrorDriver::failure() const { return state_->failure; }

}  // namespace mgt::ckpt::h5
