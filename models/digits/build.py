"""Build models/digits: a handwritten-digit classifier with real trained weights.

Trains a small MLP on the 8x8 digits data set that scikit-learn ships, writes it
as an OpenVINO IR with openvino's Python API (weights compressed to f16, as
`ovc` does by default), and saves a few test images as example inputs.

    pip install -e ".[test]" scikit-learn && python models/digits/build.py
"""
from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset8 as ops
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier

HERE = Path(__file__).resolve().parent


def main():
    digits = load_digits()
    images = digits.images.astype(np.float32)              # (1797, 8, 8), values 0..16
    x_train, x_test, y_train, y_test = train_test_split(images, digits.target, test_size=0.25,
                                                        random_state=0, stratify=digits.target)
    mlp = MLPClassifier(hidden_layer_sizes=(48,), max_iter=600, random_state=0)
    mlp.fit(x_train.reshape(len(x_train), -1) / 16.0, y_train)
    print(f"scikit-learn test accuracy: {mlp.score(x_test.reshape(len(x_test), -1) / 16.0, y_test):.4f}")

    image = ops.parameter([-1, 1, 8, 8], ov.Type.f32, name="image")      # batch of grey 8x8 images, 0..16
    flat = ops.reshape(image, ops.constant(np.array([0, -1], np.int64)), special_zero=True)
    scaled = ops.multiply(flat, ops.constant(np.float32(1 / 16)))
    hidden = ops.relu(ops.add(ops.matmul(scaled, ops.constant(mlp.coefs_[0].astype(np.float32)), False, False),
                              ops.constant(mlp.intercepts_[0].astype(np.float32))))
    logits = ops.add(ops.matmul(hidden, ops.constant(mlp.coefs_[1].astype(np.float32)), False, False),
                     ops.constant(mlp.intercepts_[1].astype(np.float32)))
    probabilities = ops.softmax(logits, -1)
    probabilities.output(0).set_names({"probabilities"})
    model = ov.Model([ops.result(probabilities)], [image], "digits-mlp")
    ov.save_model(model, str(HERE / "model.xml"))              # compress_to_fp16 by default

    for digit in (0, 3, 7):
        index = int(np.flatnonzero(y_test == digit)[0])
        np.save(HERE / f"digit{digit}.npy", x_test[index][None, None])
    np.savez(HERE / "test_set.npz", images=x_test[:, None], labels=y_test.astype(np.int64))


if __name__ == "__main__":
    main()
