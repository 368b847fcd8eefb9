// MD5 (RFC 1321), used only to name dataset cache files the way Megatron does.
#pragma once
#include <string>
#include <string_view>

namespace mgt {

std::string md5_hex(std::string_view data);

}  // namespace mgt
