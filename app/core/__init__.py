"""The one inference core: models, prediction, embeddings, gradients, alignment and the techniques built on them.

Nothing here imports gradio or lit_nlp; the CLI, the Gradio app and the LIT wrappers are adapters over it.
"""
from .ground.runtime import prepare as _prepare

_prepare()
from . import catalogue  # noqa: E402, F401 - the built-in capabilities, registered before any reader looks
