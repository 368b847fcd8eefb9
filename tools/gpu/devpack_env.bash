# Sourced by the GPU machine's scripts from the repository root: unpacks .devpack/pack.tar.xz
# (or $MGT_DEVPACK's, made by tools/gpu/pack.sh) and sets the environment its programs need there:
# PATH and LD_LIBRARY_PATH (the pack's libraries, CUDA's, and the NCCL and cuDNN of the machine's
# PyTorch), NVLink multicast off, and $py (the Python that holds PyTorch). Sets dp and sp too.
dp=${MGT_DEVPACK:-$PWD/.devpack}
sp=/opt/torch/.venv/lib/python3.12/site-packages
py=/opt/torch/.venv/bin/python3
[ -x "$py" ] || py=python3
# Once per pack (a second script of the same call finds it unpacked), by a Python that does not
# see the pack's libraries: a second unpacking under this LD_LIBRARY_PATH crashed in liblzma.
if [ ! -e "$dp/.unpacked" ] || [ "$dp/pack.tar.xz" -nt "$dp/.unpacked" ]; then
  env -u LD_LIBRARY_PATH python3 -c "import tarfile,sys;tarfile.open(sys.argv[1]).extractall(sys.argv[2])" \
    "$dp/pack.tar.xz" "$dp" && touch "$dp/.unpacked"
fi
export PATH=$dp/bin:$PATH
export LD_LIBRARY_PATH=$dp/lib:/usr/local/cuda/lib64:$sp/nvidia/nccl/lib:$sp/nvidia/cudnn/lib
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
