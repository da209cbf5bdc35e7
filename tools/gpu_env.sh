# Source at the start of every device command (see ../shared/gpu/README.md).
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD:${PYTHONPATH:-} PATH=/tmp/site/bin:$PATH
# A copy outside the carried tree: a later call lays .gpu-libs anew (or not at
# all), and jobs still running in the background would lose nsys's libraries.
if [ -d .gpu-libs ]; then mkdir -p /tmp/gpu-libs && cp -r .gpu-libs/. /tmp/gpu-libs/; fi
export LD_LIBRARY_PATH=/tmp/gpu-libs/lib:${LD_LIBRARY_PATH:-}
NSYS=$(ls /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys | tail -1)
ln -sf "$NSYS" /tmp/site/bin/nsys
export PYTHONUNBUFFERED=1
