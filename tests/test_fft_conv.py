"""The zero-padded FFT of gridmix.mixers.fft_conv against torch's rfftn / irfftn on the padded
tensor, and the linear convolution built from the two against its direct sum."""

import itertools

import pytest
import torch

from gridmix.mixers.fft_conv import cropped_inverse, padded_spectrum

# (tensor shape, the convolved dims): channels first and last, 1-d to 3-d, dims not adjacent
CASES = [
    ((2, 3, 7), [-1]),
    ((2, 3, 5, 6), [-2, -1]),
    ((2, 5, 6, 3), [1, 2]),
    ((1, 2, 3, 4, 5), [-3, -2, -1]),
    ((2, 3, 4, 5, 2), [1, 3]),
]


def padded_filter_spectrum(shape, dims) -> torch.Tensor:
    """The rfftn of a random real filter laid out on the padded axes of ``dims`` (1 elsewhere)."""
    filter_shape = [1] * len(shape)
    for d in dims:
        filter_shape[d] = 2 * shape[d]
    return torch.fft.rfftn(torch.randn(filter_shape, dtype=torch.float64), dim=dims)


@pytest.mark.parametrize("shape, dims", CASES)
def test_padded_spectrum_is_rfftn_of_the_padded_tensor(shape, dims):
    x = torch.randn(shape, dtype=torch.float64)
    expected = torch.fft.rfftn(x, s=[2 * shape[d] for d in dims], dim=dims)
    torch.testing.assert_close(padded_spectrum(x, dims), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("shape, dims", CASES)
def test_cropped_inverse_is_irfftn_cropped(shape, dims):
    lengths = [shape[d] for d in dims]
    x = torch.randn(shape, dtype=torch.float64)
    # a real tensor's padded spectrum times a real filter's: a circular convolution's spectrum
    spectrum = torch.fft.rfftn(x, s=[2 * n for n in lengths], dim=dims) * padded_filter_spectrum(
        shape, dims
    )
    expected = torch.fft.irfftn(spectrum, s=[2 * n for n in lengths], dim=dims)
    for d, n in zip(dims, lengths):
        expected = expected.narrow(d, 0, n)
    got = cropped_inverse(spectrum, dims, lengths)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)


def test_the_two_make_the_linear_convolution_and_its_gradient():
    n1, n2 = 4, 5
    x = torch.randn(2, n1, n2, dtype=torch.float64, requires_grad=True)
    # lag (l1, l2) at (l1 mod 2 n1, l2 mod 2 n2); index n_k (lag ±n_k) unused, so zero
    h = torch.randn(2 * n1, 2 * n2, dtype=torch.float64)
    h[n1], h[:, n2] = 0.0, 0.0

    def conv(x):
        spectrum = padded_spectrum(x, [-2, -1]) * torch.fft.rfftn(h, dim=[-2, -1])
        return cropped_inverse(spectrum, [-2, -1], [n1, n2])  # (2, n1, n2)

    expected = torch.zeros(2, n1, n2, dtype=torch.float64)
    for i, j, a, b in itertools.product(range(n1), range(n2), range(n1), range(n2)):
        expected[:, i, j] += h[(i - a) % (2 * n1), (j - b) % (2 * n2)] * x[:, a, b].detach()
    torch.testing.assert_close(conv(x), expected, rtol=0, atol=1e-12)
    assert torch.autograd.gradcheck(conv, (x,))
