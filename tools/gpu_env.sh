# Source at the start of every device command (see ../shared/gpu/README.md).
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD:${PYTHONPATH:-} PATH=/tmp/site/bin:$PATH
export LD_LIBRARY_PATH=$PWD/.gpu-libs/lib:${LD_LIBRARY_PATH:-}
NSYS=$(ls /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys | tail -1)
ln -sf "$NSYS" /tmp/site/bin/nsys
export PYTHONUNBUFFERED=1
