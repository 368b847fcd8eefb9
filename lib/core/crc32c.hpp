// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of TFRecord files and of
// iSCSI; crc32c("123456789") = 0xE3069283.
#pragma once
#include <cstdint>
#include <string_view>

namespace mgt {

// The CRC of `data`; pass an earlier result as `crc` to continue over a longer input.
std::uint32_t crc32c(std::string_view data, std::uint32_t crc = 0);

}  // namespace mgt
