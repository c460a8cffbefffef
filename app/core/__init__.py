"""The one inference core: models, prediction, embeddings, gradients, alignment and the techniques built on them.

Nothing here imports gradio or lit_nlp; the CLI, the Gradio app and the LIT wrappers are adapters over it.
"""
from .ground.runtime import prepare as _prepare

_prepare()
