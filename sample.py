"""Generate text from a trained TinyLM checkpoint, with the tokenizer stored in it.

python sample.py ckpt=outputs/DATE/TIME                    # the run's last.pt
python sample.py ckpt=outputs/DATE/TIME/best.pt prompt="ROMEO:" num_samples=3 max_new_tokens=300 temperature=0.8 top_k=40
"""

import sys
from pathlib import Path

import hydra
import torch
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf
from tokenizers import Tokenizer

from model import TinyLM
from trainer import ConfigError, pick_device
from trainer.checkpoint import LAST, load_checkpoint, model_config
from trainer.cli import run_with_one_line_errors
from trainer.sampling import SampleConfig, check_sample_config, encode_prompt

ConfigStore.instance().store(name="sample_schema", node=SampleConfig)


@hydra.main(version_base="1.3", config_path=str(Path(__file__).parent / "configs"), config_name="sample")
def main(cfg: DictConfig) -> None:
    try:
        config: SampleConfig = OmegaConf.to_object(cfg)
        check_sample_config(config)
        path = Path(config.ckpt).expanduser()
        checkpoint = load_checkpoint(path / LAST if path.is_dir() else path)  # weights only: no code runs
        tokenizer = Tokenizer.from_str(checkpoint["tokenizer"])
        prompt = encode_prompt(tokenizer, config.prompt)
        device = pick_device(config.device)
    except ConfigError as error:
        sys.exit(f"error: {error}")

    model = TinyLM(model_config(checkpoint)).to(device)
    model.load_state_dict(checkpoint["model"])
    model.eval()
    context = torch.tensor([prompt] * config.num_samples, device=device)
    generator = torch.Generator(device).manual_seed(config.seed)
    generated = model.generate(context, config.max_new_tokens, config.temperature, config.top_k, generator)
    for i, ids in enumerate(generated.tolist()):
        if i:
            print("\n" + "-" * 40)
        print(tokenizer.decode(ids))


if __name__ == "__main__":
    run_with_one_line_errors(main)
