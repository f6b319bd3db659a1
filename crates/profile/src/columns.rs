//! Rust field types that map onto Arrow column types.

use arrow::array::{
    Array, ArrayRef, BooleanArray, Float64Array, Int32Array, Int64Array, StringArray, UInt32Array,
    UInt64Array, UInt8Array,
};
use arrow::buffer::{BooleanBuffer, NullBuffer, ScalarBuffer};
use arrow::datatypes::DataType;
use std::sync::Arc;

pub trait ColumnType: Sized + Clone {
    const NULLABLE: bool;
    fn data_type() -> DataType;
    fn to_array<'a>(values: impl Iterator<Item = &'a Self>) -> ArrayRef
    where
        Self: 'a;
    fn from_array(array: &dyn Array) -> Option<Vec<Self>>;
    /// The column of a file written before it existed: nulls for an
    /// optional column (a new optional column keeps older profiles readable),
    /// none for a required one.
    fn absent(_rows: usize) -> Option<Vec<Self>> {
        None
    }
}

macro_rules! primitive {
    ($ty:ty, $arr:ty, $dt:expr) => {
        impl ColumnType for $ty {
            const NULLABLE: bool = false;
            fn data_type() -> DataType {
                $dt
            }
            fn to_array<'a>(values: impl Iterator<Item = &'a Self>) -> ArrayRef {
                Arc::new(<$arr>::from_iter_values(values.copied()))
            }
            fn from_array(array: &dyn Array) -> Option<Vec<Self>> {
                let a = array.as_any().downcast_ref::<$arr>()?;
                Some((0..a.len()).map(|i| a.value(i)).collect())
            }
        }

        impl ColumnType for Option<$ty> {
            const NULLABLE: bool = true;
            fn absent(rows: usize) -> Option<Vec<Self>> {
                Some(vec![None; rows])
            }
            fn data_type() -> DataType {
                $dt
            }
            fn to_array<'a>(values: impl Iterator<Item = &'a Self>) -> ArrayRef {
                // Values and validity built apart: collecting Options appends
                // to a null-buffer builder per value (a tenth of an import's
                // time went there).
                let values: Vec<Self> = values.copied().collect();
                let nulls = (values.iter().any(Option::is_none))
                    .then(|| NullBuffer::from_iter(values.iter().map(Option::is_some)));
                let data: ScalarBuffer<$ty> =
                    values.iter().map(|v| v.unwrap_or_default()).collect();
                Arc::new(<$arr>::new(data, nulls))
            }
            fn from_array(array: &dyn Array) -> Option<Vec<Self>> {
                let a = array.as_any().downcast_ref::<$arr>()?;
                Some(
                    (0..a.len())
                        .map(|i| a.is_valid(i).then(|| a.value(i)))
                        .collect(),
                )
            }
        }
    };
}

primitive!(u64, UInt64Array, DataType::UInt64);
primitive!(u32, UInt32Array, DataType::UInt32);
primitive!(u8, UInt8Array, DataType::UInt8);
primitive!(i64, Int64Array, DataType::Int64);
primitive!(i32, Int32Array, DataType::Int32);
primitive!(f64, Float64Array, DataType::Float64);

impl ColumnType for bool {
    const NULLABLE: bool = false;
    fn data_type() -> DataType {
        DataType::Boolean
    }
    fn to_array<'a>(values: impl Iterator<Item = &'a Self>) -> ArrayRef {
        Arc::new(BooleanArray::new(
            BooleanBuffer::from_iter(values.copied()),
            None,
        ))
    }
    fn from_array(array: &dyn Array) -> Option<Vec<Self>> {
        let a = array.as_any().downcast_ref::<BooleanArray>()?;
        Some((0..a.len()).map(|i| a.value(i)).collect())
    }
}

impl ColumnType for String {
    const NULLABLE: bool = false;
    fn data_type() -> DataType {
        DataType::Utf8
    }
    fn to_array<'a>(values: impl Iterator<Item = &'a Self>) -> ArrayRef {
        Arc::new(values.map(|s| Some(s.as_str())).collect::<StringArray>())
    }
    fn from_array(array: &dyn Array) -> Option<Vec<Self>> {
        let a = array.as_any().downcast_ref::<StringArray>()?;
        Some((0..a.len()).map(|i| a.value(i).to_string()).collect())
    }
}

impl ColumnType for Option<String> {
    const NULLABLE: bool = true;
    fn absent(rows: usize) -> Option<Vec<Self>> {
        Some(vec![None; rows])
    }
    fn data_type() -> DataType {
        DataType::Utf8
    }
    fn to_array<'a>(values: impl Iterator<Item = &'a Self>) -> ArrayRef {
        Arc::new(values.map(|s| s.as_deref()).collect::<StringArray>())
    }
    fn from_array(array: &dyn Array) -> Option<Vec<Self>> {
        let a = array.as_any().downcast_ref::<StringArray>()?;
        Some(
            (0..a.len())
                .map(|i| a.is_valid(i).then(|| a.value(i).to_string()))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::ColumnType;

    #[test]
    fn optional_and_boolean_columns_come_back_as_written() {
        for column in [
            vec![Some(1u32), None, Some(3)],
            vec![Some(7), Some(8)],
            vec![None, None],
        ] {
            let array = <Option<u32>>::to_array(column.iter());
            assert_eq!(
                array.null_count(),
                column.iter().filter(|v| v.is_none()).count()
            );
            assert_eq!(<Option<u32>>::from_array(array.as_ref()).unwrap(), column);
        }
        let flags = vec![true, false, false, true, true];
        let array = bool::to_array(flags.iter());
        assert_eq!(bool::from_array(array.as_ref()).unwrap(), flags);
    }
}
