#!/bin/sh
# Regenerates shim/src/sys.rs from the installed rdma-core headers
# (libibverbs-dev, librdmacm-dev; `cargo install bindgen-cli`).
set -eu
cd "$(dirname "$0")"
hdr=$(mktemp --suffix=.h)
trap 'rm -f "$hdr"' EXIT
printf '#include <infiniband/verbs.h>\n#include <infiniband/mlx5dv.h>\n#include <rdma/rdma_cma.h>\n#include <rdma/rdma_verbs.h>\n#include <infiniband/efadv.h>\n' > "$hdr"
{
  sed -n '1,6p' src/sys.rs
  bindgen "$hdr" --allowlist-type '(ibv|verbs|mlx5dv|rdma|efadv|_ibv|_compat_ibv|mlx5_wqe)_.*' \
    --blocklist-type mlx5_wqe_ctrl_seg \
    --allowlist-var '(IBV|MLX5DV|RDMA|IBVERBS|MLX5|EFADV)_.*' --no-layout-tests --with-derive-default \
    --use-core --no-doc-comments --default-enum-style consts --no-prepend-enum-name --ctypes-prefix core::ffi
  # The hand-declared tail (mlx5_wqe_ctrl_seg: bindgen gets its layout wrong).
  echo
  sed -n '/^\/\/ ---- Hand-declared: gen-sys.sh keeps/,$p' src/sys.rs
} > src/sys.rs.new
mv src/sys.rs.new src/sys.rs
