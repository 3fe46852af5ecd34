# Sourced by the GPU machine's scripts (gpu_verdicts.sh, gpu_kernels.sh, gpu_watch.sh, gpu_job_capture.sh):
# the one way they install the carried wheels and put this checkout's hanganalyze first on PATH.
#
#   gpu_setup WORK_DIR "$@"     (REPO and PY set; --install as the first argument installs .whl/*.whl)
gpu_setup() {
    local work=$1
    shift
    if [ "${1:-}" = "--install" ]; then
        $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
            "$REPO"/.whl/*.whl || { echo "wheel install failed"; exit 1; }
        export PYTHONPATH=/tmp/site
    fi
    # The project itself: its two import folders on the path, no install step; the checkout's
    # signatures/ is found beside them (hanganalyze/datapaths.py).
    export PYTHONPATH="$REPO/analyzer:$REPO/gdbext${PYTHONPATH:+:$PYTHONPATH}"
    mkdir -p "$work/bin"
    printf '#!/bin/sh\nexec %s -m hanganalyze "$@"\n' "$(command -v $PY)" > "$work/bin/hanganalyze"
    chmod +x "$work/bin/hanganalyze"
    export PATH="$work/bin:$PATH"
}
