# Hugging Face Docker Space: the app on port 7860 as uid 1000. All steps live in scripts/space_build.sh,
# which is tested on our machines (no Docker engine runs there).
FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends git && rm -rf /var/lib/apt/lists/* \
    && useradd -m -u 1000 user
ENV HOME=/home/user \
    HF_HOME=/home/user/.cache/huggingface \
    ALBERT_LENS_CACHE=/home/user/.cache/albert-lens \
    ALBERT_LENS_HOSTED=1 \
    ALBERT_LENS_PROXIES=1 \
    PYTHONUNBUFFERED=1
# ALBERT_LENS_PROXIES=1: the Space's proxy is the peer of every request; each visitor's fair share of /predict is
# keyed by the address it appends to X-Forwarded-For
WORKDIR /home/user/app
COPY --chown=user . .
# A Space on GPU hardware: build with a CUDA build of PyTorch, e.g.
#   --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128
# (the default, empty, takes the pinned CPU wheel); the app then answers on the GPU (`--device auto`).
ARG TORCH_SPEC=torch==2.13.0
ARG TORCH_INDEX_URL=
RUN TORCH_SPEC="$TORCH_SPEC" TORCH_INDEX_URL="$TORCH_INDEX_URL" bash scripts/space_build.sh /home/user/app/.venv \
    && chown -R user:user /home/user
USER user
EXPOSE 7860
# ALBERT_LENS_MODE=lit serves LIT on the same port instead of the Gradio app.
CMD ["bash", "-c", "if [ \"${ALBERT_LENS_MODE:-app}\" = lit ]; then exec .venv/bin/albert-lens lit --host 0.0.0.0 --port 7860; else exec .venv/bin/albert-lens app --host 0.0.0.0 --port 7860; fi"]
