"""The offline toy panel: tiny GPT-NeoX / OLMo / OLMoE models trained on CPU from a generated corpus."""

from circuitdev.toy.recipe import FAMILIES, PANEL_NAMES, Mixture, ToyRecipe, default_grid
from circuitdev.toy.train import build_model, prepare_corpus, train_all, train_family, write_panel_file

__all__ = ["FAMILIES", "PANEL_NAMES", "Mixture", "ToyRecipe", "default_grid", "build_model", "prepare_corpus",
           "train_all", "train_family", "write_panel_file"]
